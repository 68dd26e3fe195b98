"""The race tests' own machinery: a task that will not stop is reported and left behind, not waited on for
ever by the loop's close (tests/support/settlement.py ``leave_stuck_tasks_behind``)."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.settlement import leave_stuck_tasks_behind


async def test_a_task_that_ignores_its_cancel_is_reported_and_left_behind() -> None:
    never = asyncio.Event()

    async def stubborn() -> None:
        while True:
            try:
                await never.wait()
            except asyncio.CancelledError:
                continue  # as a client library holding on to a cancelled wait

    async def polite() -> None:
        await never.wait()

    stuck, fine = asyncio.create_task(stubborn()), asyncio.create_task(polite())
    await asyncio.sleep(0)  # both start waiting
    with pytest.warns(UserWarning, match="left behind, still running 0.2s after its cancel"):
        stacks = await leave_stuck_tasks_behind(within=0.2)
    assert len(stacks) == 1
    assert "stubborn" in stacks[0]
    assert fine.cancelled()
    assert stuck not in asyncio.all_tasks()  # the loop's close will not wait for it
