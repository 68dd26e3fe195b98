"""The exchange's inbox: items come out in order, a waiting reader wakes on the next one, and a reader
cancelled mid-wait leaves the box usable."""

from __future__ import annotations

import asyncio

import pytest

from mcp_server.transports.inbox import Inbox

WITHIN = 5.0


@pytest.mark.asyncio
async def test_items_come_out_in_the_order_they_went_in() -> None:
    box: Inbox[int] = Inbox()
    for n in range(3):
        box.put_nowait(n)
    assert not box.empty()
    assert [await box.get() for _ in range(3)] == [0, 1, 2]
    assert box.empty()


@pytest.mark.asyncio
async def test_a_waiting_reader_wakes_on_the_next_item() -> None:
    box: Inbox[str] = Inbox()
    reading = asyncio.ensure_future(box.get())
    await asyncio.sleep(0)  # the reader is now waiting on its future
    assert not reading.done()
    box.put_nowait("a")
    assert await asyncio.wait_for(reading, WITHIN) == "a"


@pytest.mark.asyncio
async def test_a_reader_cancelled_while_waiting_leaves_the_box_usable() -> None:
    box: Inbox[str] = Inbox()
    reading = asyncio.ensure_future(box.get())
    await asyncio.sleep(0)
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading
    box.put_nowait("b")
    assert await asyncio.wait_for(box.get(), WITHIN) == "b"
