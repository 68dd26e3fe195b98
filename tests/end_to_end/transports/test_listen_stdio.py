"""``subscriptions/listen`` over stdio at 2026-07-28 (``manage.py mcp_stdio`` on raw pipes): notifications on
stdout tagged with the subscription id, only the kinds asked for, ``notifications/cancelled`` ends the stream
without a reply (its ledger row settled cancelled), the end of input answers it with the ``complete``
result."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.support.raw import rpc
from tests.support.stdio import RawStdio, database, rows, start, template

pytestmark = pytest.mark.asyncio

__all__ = ["database", "start", "template"]  # the fixtures this module borrows

SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def request(method: str, params: dict[str, Any], request_id: int | str) -> dict[str, Any]:
    return rpc(method, {**params, "_meta": META}, request_id)


async def next_notification(raw: RawStdio, after: int = 0) -> dict[str, Any]:
    """The first notification stdout carried after its ``after`` first lines (read more if none yet)."""
    while True:
        found = [m for m in raw.messages[after:] if "method" in m]
        if found:
            return found[0]
        await raw.receive()


async def open_listen(raw: RawStdio, request_id: int | str, **notifications: Any) -> dict[str, Any]:
    seen = len(raw.lines)
    await raw.send(request("subscriptions/listen", {"notifications": notifications}, request_id))
    ack = await next_notification(raw, seen)
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["_meta"][SUBSCRIPTION] == request_id
    return ack


async def test_listen_streams_the_kinds_asked_for_tagged(start: Any) -> None:
    raw: RawStdio = await start()
    ack = await open_listen(raw, "sub-1", toolsListChanged=True)
    assert ack["params"]["notifications"] == {"toolsListChanged": True}
    seen = len(raw.lines)
    await raw.request(request("test/notify", {"feature": "prompts"}, 2))  # not asked for
    await raw.request(request("test/notify", {"feature": "tools"}, 3))
    changed = await next_notification(raw, seen)  # the first one after the ack: prompts were passed over
    assert changed["method"] == "notifications/tools/list_changed"
    assert changed["params"]["_meta"][SUBSCRIPTION] == "sub-1"
    assert await raw.finish() == 0
    [final] = raw.answers_to("sub-1")  # the end of input ends the stream gracefully
    assert final["result"]["resultType"] == "complete"
    assert final["result"]["_meta"][SUBSCRIPTION] == "sub-1"


async def test_cancelled_ends_the_stream_without_a_reply(start: Any, database: Path) -> None:
    raw: RawStdio = await start()
    await open_listen(raw, 7, promptsListChanged=True)
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
    await raw.send(cancel)

    def state() -> list[Any]:
        return rows(database, "SELECT state FROM mcp_server_ledgerentry WHERE request_key = 'i:7'")

    async with asyncio.timeout(20):
        while state() != [("cancelled",)]:
            await raw.request(request("server/discover", {}, "poll"))  # also: the loop goes on
    await open_listen(raw, 9, promptsListChanged=True)  # a second stream, to see the change go out
    seen = len(raw.lines)
    await raw.request(request("test/notify", {"feature": "prompts"}, 8))
    changed = await next_notification(raw, seen)
    assert changed["params"]["_meta"][SUBSCRIPTION] == 9
    assert await raw.finish() == 0
    assert raw.answers_to(7) == []
    tagged_7 = [m for m in raw.messages if "method" in m and m["params"]["_meta"].get(SUBSCRIPTION) == 7]
    assert [m["method"] for m in tagged_7] == ["notifications/subscriptions/acknowledged"]
    assert raw.answers_to(9)[0]["result"]["resultType"] == "complete"
