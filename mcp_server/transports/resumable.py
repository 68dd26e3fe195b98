"""Resumable handshake-era SSE streams: event ids, the stored copy of each stream, and ``Last-Event-ID``.

Every event of a POST stream or a GET stream carries ``id: <stream-id>:<seq>`` (stream ids are random, so an
id is unique across the session and names its stream: ``p…`` a POST stream, ``g…`` a GET stream). A stream
opens with a priming event (an id, empty data, and a ``retry:`` hint) for clients at 2025-11-25 and later.
Each event is also queued for the event store (written behind the request path, in batches).

When the client of a POST stream has gone, or the stream was closed so that the client polls
(``SSE_POLL_AFTER``, or a handler's ``ctx.close_stream()``), the request goes on running: its later events,
the response among them, are written through to the store and the stream is woken
(:class:`~mcp_server.runtime.stream_hub.StreamHub`), never sent on the dead connection. A ``GET`` with
``Last-Event-ID`` (:func:`serve_resumed`), on any worker, replays the events of that stream only after that
id, then goes on with what comes, until the POST stream's end.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid

from ..conf import mcp_settings
from ..runtime import Runtime
from ..runtime.stream_hub import POLL_INTERVAL
from ..stores.events.base import StoredEvent, parse_event_id
from ..wire.asgi import Send, body_chunk, body_end, response_start
from . import sse
from .rules import HTTPProblem

__all__ = ["PRIMING_VERSION", "EventLog", "serve_resumed"]

PRIMING_VERSION = "2025-11-25"
"""The first revision whose clients get a priming event and a ``retry`` hint (older ones may choke on an event
with empty data)."""

UNKNOWN_GRACE = 2.0
"""Seconds a ``Last-Event-ID`` of a POST stream the store knows nothing of is waited for (its first rows may
still be on their way, written in batches) before it is refused (400)."""


class EventLog:
    """The ids of one stream's events, and their stored copy."""

    def __init__(
        self,
        runtime: Runtime,
        session_id: str,
        protocol_version: str,
        *,
        kind: str = "p",
        stream_id: str | None = None,
        seq: int = 0,
    ) -> None:
        self.runtime = runtime
        self.session_id = session_id
        self.protocol_version = protocol_version
        self.stream_id = stream_id or f"{kind}{uuid.uuid4().hex}"
        self.seq = seq
        self.ended = False
        self.primed = False
        self.detached = False
        """The client has gone, or the stream was closed for polling: events go to the store only."""

    def priming(self, keys: list[str]) -> bytes:
        """Open the stream: its ``seq`` 0 rows (one per request it carries) and the priming event, if the
        client's revision has them (else ``b""``)."""
        for key in keys or [""]:
            self.runtime.events.add(StoredEvent(self.session_id, self.stream_id, 0, "", key))
        if self.protocol_version < PRIMING_VERSION:
            return b""
        self.primed = True
        retry = mcp_settings.SSE_RETRY_MS
        hint = f"retry: {int(retry)}\n" if retry is not None else ""
        return f"id: {self.stream_id}:0\n{hint}data: \n\n".encode()

    def event(self, data: bytes, key: str = "", *, last: bool = False) -> bytes:
        """The next event, as sent (and queued for the store); ``key``: the request a response answers;
        ``last``: the stream's final event (its row ends the stream: no end row is written after it)."""
        self.seq += 1
        self.ended = last
        row = StoredEvent(self.session_id, self.stream_id, self.seq, data.decode(), key, last)
        self.runtime.events.add(row)
        return sse.event(data, f"{self.stream_id}:{self.seq}")

    @property
    def resumable(self) -> bool:
        """Whether the client has an id of this stream to resume from (the priming event, or an event)."""
        return self.primed or self.seq > 0

    async def detach(self) -> None:
        """The connection is gone: from now on events are written through and the stream woken."""
        if not self.detached:
            self.detached = True
            await self._through([])

    async def hand_over(self, data: bytes, key: str = "", *, last: bool = False) -> None:
        """An event for a client that will resume: stored (waited for), then the stream woken."""
        self.seq += 1
        self.ended = last
        row = StoredEvent(self.session_id, self.stream_id, self.seq, data.decode(), key, last)
        await self._through([row])

    async def end(self) -> None:
        """The stream's requests are all settled: its end row (a resumed stream closes there), unless its
        final event already said so."""
        if self.ended:
            return
        self.seq += 1
        row = StoredEvent(self.session_id, self.stream_id, self.seq, last=True)
        if self.detached:
            await self._through([row])
        else:
            self.runtime.events.add(row)

    async def _through(self, rows: list[StoredEvent]) -> None:
        with contextlib.suppress(Exception):  # queued again: written behind, found by the polling
            await self.runtime.events.write_now(rows)
        await self.runtime.resumed.wake(self.stream_id)


async def serve_resumed(
    runtime: Runtime,
    session_id: str,
    last_event_id: str,
    send: Send,
    closed: asyncio.Event,
) -> None:
    """``GET`` with ``Last-Event-ID`` of a POST stream: replay its events after that id, then the ones that
    come, until its end row (or the client goes). Raises ``HTTPProblem`` 400 for an id not of the form this
    server issues, and for one whose stream the store does not know (after :data:`UNKNOWN_GRACE`)."""
    parsed = parse_event_id(last_event_id)
    if parsed is None or not parsed[0].startswith("p"):
        raise HTTPProblem(400, "Bad Request: Last-Event-ID names no stream of this server")
    stream_id, last = parsed
    store = runtime.event_store
    async with runtime.resumed.watch(stream_id) as woken:
        rows = await _known_rows(runtime, session_id, stream_id, woken, closed)
        if not rows:  # never issued in this session, or pruned (EVENT_RETENTION): nothing to resume
            raise HTTPProblem(400, "Bad Request: Last-Event-ID names no stream of this session")
        await send(response_start(200, sse.SSE_HEADERS))
        # a body at once: the server sends the headers with it (a quiet handler would hold them back)
        await send(body_chunk(b": stream resumed\n\n"))
        while True:
            sent: list[bytes] = []
            ended = _replay(rows, last, sent)
            for body in sent:
                await send(body_chunk(body))
            if ended:
                break
            last = max([last, *(r.seq for r in rows if r.seq > last and not r.last)])
            await _wait_any(woken, closed, seconds=POLL_INTERVAL)
            if closed.is_set() or runtime.shutting_down:
                break
            woken.clear()
            rows = await store.aevents_after(session_id, stream_id, last)
    await send(body_end())


async def _known_rows(
    runtime: Runtime, session_id: str, stream_id: str, woken: asyncio.Event, closed: asyncio.Event
) -> list[StoredEvent]:
    """Every stored row of the stream; waited for up to :data:`UNKNOWN_GRACE` (its first rows may still be
    on their way, written in batches by another worker), ``[]`` if none come."""
    with contextlib.suppress(Exception):  # what this worker sent on it is stored before it is read
        await runtime.events.write_now([])
    loop = asyncio.get_running_loop()
    give_up = loop.time() + UNKNOWN_GRACE + runtime.events.interval
    while True:
        woken.clear()
        rows = await runtime.event_store.aevents_after(session_id, stream_id, -1)
        if rows or closed.is_set() or runtime.shutting_down or loop.time() > give_up:
            return rows
        await _wait_any(woken, closed, seconds=POLL_INTERVAL)


def _replay(rows: list[StoredEvent], last: int, sent: list[bytes]) -> bool:
    """Append to ``sent`` the events after ``last`` (each seq once); ``True`` once the end row is reached."""
    for row in rows:
        if row.seq <= last:
            if row.last:  # the client has seen the stream's final event already
                return True
            continue
        if row.data:
            sent.append(sse.event(row.data.encode(), row.event_id))
        if row.last:
            return True
        last = row.seq
    return False


async def _wait_any(first: asyncio.Event, second: asyncio.Event, *, seconds: float) -> None:
    waits = [asyncio.ensure_future(first.wait()), asyncio.ensure_future(second.wait())]
    try:
        await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
