"""``serve_resumed`` in process, on a real ``Runtime`` and the database event store: a resumed POST stream
replays what its client missed, then ends when the client goes or the worker shuts down, even though the
stream itself has not ended. (The same over live HTTP: tests/end_to_end/transports/test_resumable.py.)"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from mcp_server.runtime import Runtime
from mcp_server.stores.ledger.database import DatabaseLedger
from mcp_server.transports import sse
from mcp_server.transports.resumable import UNKNOWN_GRACE, EventLog, serve_resumed
from mcp_server.transports.rules import HTTPProblem
from mcp_server.wire.versions import LATEST_VERSION

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]

SESSION = "resumed-session"
NOTE = json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}})
LATER = json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "debug"}})
END = {"type": "http.response.body", "body": b"", "more_body": False}


@pytest.fixture
async def runtime(settings: Any) -> AsyncIterator[Runtime]:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    made = Runtime(
        worker_id="w", ledger=DatabaseLedger({}), channel_layer_alias="default", flush_interval=0.01
    )
    await made.start()
    yield made
    await made.requests.shutdown("test over")
    await made.aclose()


async def open_stream(runtime: Runtime) -> EventLog:
    """A POST stream that sent its priming event and one notification, and has not ended (stored)."""
    log = EventLog(runtime, SESSION, LATEST_VERSION)
    assert log.priming(["key-1"])
    log.event(NOTE.encode())
    await runtime.events.write_now([])
    return log


RESUMED = {"type": "http.response.body", "body": b": stream resumed\n\n", "more_body": True}
"""The comment a resumed stream opens with (the server sends the headers with a first body)."""


async def resume(runtime: Runtime, log: EventLog, closed: asyncio.Event) -> list[dict[str, Any]]:
    """What ``serve_resumed`` sends, the opening comment left out."""
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        if message != RESUMED:
            sent.append(message)

    async with asyncio.timeout(20):
        await serve_resumed(runtime, SESSION, f"{log.stream_id}:0", send, closed)
    return sent


def sent_only_what_it_has(sent: list[dict[str, Any]], log: EventLog) -> None:
    """The response's start, the event the client missed, then the end: the stream itself has not ended."""
    assert sent[0]["status"] == 200
    missed = {
        "type": "http.response.body",
        "body": sse.event(NOTE.encode(), f"{log.stream_id}:1"),
        "more_body": True,
    }
    assert sent[1:] == [missed, END]


async def test_a_resumed_stream_whose_client_has_gone_ends_at_once(runtime: Runtime) -> None:
    log = await open_stream(runtime)
    closed = asyncio.Event()
    closed.set()
    sent_only_what_it_has(await resume(runtime, log, closed), log)


async def test_a_resumed_stream_ends_when_the_worker_shuts_down(runtime: Runtime) -> None:
    log = await open_stream(runtime)
    runtime.shutting_down = True
    sent_only_what_it_has(await resume(runtime, log, asyncio.Event()), log)


async def test_a_resumed_stream_replays_what_was_missed_until_its_end(runtime: Runtime) -> None:
    log = await open_stream(runtime)
    await log.end()
    await runtime.events.write_now([])
    sent = await resume(runtime, log, asyncio.Event())
    bodies = [m["body"] for m in sent[1:]]
    assert bodies == [sse.event(NOTE.encode(), f"{log.stream_id}:1"), b""]
    assert sent[-1] == END


async def test_a_stream_the_store_knows_nothing_of_is_given_up_after_the_grace(runtime: Runtime) -> None:
    unknown = EventLog(runtime, SESSION, LATEST_VERSION)  # never primed: no row of it is stored
    loop = asyncio.get_running_loop()
    began = loop.time()
    with pytest.raises(HTTPProblem) as refused:
        await resume(runtime, unknown, asyncio.Event())
    assert refused.value.status == 400
    assert loop.time() - began >= UNKNOWN_GRACE  # its first rows might have been on their way


async def test_a_known_stream_is_followed_past_the_grace_and_each_event_sent_once(runtime: Runtime) -> None:
    log = await open_stream(runtime)
    await log.detach()  # the POST's client has gone: later events are written through and woken
    sent: list[dict[str, Any]] = []
    changed = asyncio.Event()

    async def send(message: dict[str, Any]) -> None:
        if message != RESUMED:
            sent.append(message)
            changed.set()

    async def until(count: int) -> None:
        async with asyncio.timeout(20):
            while len(sent) < count:
                changed.clear()
                await changed.wait()

    resumed = asyncio.create_task(
        serve_resumed(runtime, SESSION, f"{log.stream_id}:0", send, asyncio.Event())
    )
    await until(2)  # the response's start, then the notification the client missed
    done, _ = await asyncio.wait({resumed}, timeout=UNKNOWN_GRACE + 1.0)
    assert not done  # a stream the store knows is followed until its end, however long it takes
    await log.hand_over(LATER.encode())
    await until(3)
    await log.end()
    async with asyncio.timeout(20):
        await resumed
    bodies = [m["body"] for m in sent[1:]]
    assert bodies == [
        sse.event(NOTE.encode(), f"{log.stream_id}:1"),
        sse.event(LATER.encode(), f"{log.stream_id}:2"),
        b"",
    ]
