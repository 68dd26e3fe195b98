"""A session's standalone SSE stream (``GET``, handshake era): where the session's server-initiated messages
go, from whichever worker sends them, until the client goes, the session ends or its credential stops
working.

The stream's events carry ids of their own (``g…``, :class:`~mcp_server.transports.resumable.EventLog`): a
``GET`` with the ``Last-Event-ID`` of a GET stream numbers on from it, after replaying what it missed. (A
``Last-Event-ID`` of a POST stream is :func:`~mcp_server.transports.resumable.serve_resumed`'s.) The
consumer (:class:`~mcp_server.transports.consumer.MCPConsumer`) checks the request, watches the credential
and ends the response.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from ..core.context import SessionState
from ..runtime import Runtime
from ..stores.events.base import parse_event_id
from ..wire.asgi import Send, body_chunk, response_start
from ..wire.errors import JSONRPCError
from ..wire.jsonrpc import encode_message
from . import sse
from .resumable import EventLog
from .rules import HTTPProblem

__all__ = ["GetStream", "open_log"]

logger = logging.getLogger("mcp_server.http")


async def open_log(runtime: Runtime, session: SessionState, last_event_id: str | None) -> EventLog:
    """The ids of a GET stream: a new one, or the one ``Last-Event-ID`` names, numbered on from there
    (``HTTPProblem`` 400 for an id of no stream of this server)."""
    assert session.id is not None
    if last_event_id is None:
        return EventLog(runtime, session.id, session.protocol_version, kind="g")
    parsed = parse_event_id(last_event_id)
    if parsed is None:
        raise HTTPProblem(400, "Bad Request: Last-Event-ID names no stream of this server")
    stream_id, seq = parsed
    with contextlib.suppress(Exception):  # what this worker sent on it is stored before it is read
        await runtime.events.write_now([])
    stored = await runtime.event_store.aevents_after(session.id, stream_id, seq)
    high = max([seq, *(e.seq for e in stored)])
    return EventLog(runtime, session.id, session.protocol_version, stream_id=stream_id, seq=high)


class GetStream:
    """One GET stream, as the runtime sees it (a :class:`~mcp_server.runtime.StreamSink` of its session):
    ``send`` is the consumer's (which drops what a vanished client can no longer get), ``ended`` the event
    that ends the response (the client went, or :meth:`close`)."""

    def __init__(
        self, runtime: Runtime, session_id: str, log: EventLog, send: Send, ended: asyncio.Event
    ) -> None:
        self.runtime = runtime
        self.session_id = session_id
        self.log = log
        self._send = send
        self.ended = ended
        self.attached = False
        """From just before it is attached to its session until just before it leaves."""
        self.closed = False

    async def serve(self, last_event_id: str | None) -> None:
        """Attach to the session, open the response (its priming event, or what a resumed stream missed)
        and hold it until it ends. The caller calls :meth:`leave` afterwards, whatever happened."""
        self.attached = True
        await self.runtime.attach_stream(self.session_id, self)
        await self._send(response_start(200, sse.SSE_HEADERS))
        opening = (self.log.priming([]) if last_event_id is None else b"") or b": stream open\n\n"
        await self._send(body_chunk(opening))
        if last_event_id is not None:  # this GET stream's own missed events first
            await self._replay(last_event_id)
        await self.ended.wait()

    async def leave(self) -> None:
        """Detach from the session (nothing more is sent on the stream)."""
        if self.attached:
            self.attached = False
            await self.runtime.detach_stream(self.session_id, self)

    async def _replay(self, last_event_id: str) -> None:
        parsed = parse_event_id(last_event_id)
        assert parsed is not None
        stream_id, seq = parsed
        sent = seq
        for row in await self.runtime.event_store.aevents_after(self.session_id, stream_id, seq):
            if row.seq > sent and not row.last:
                body = sse.event(row.data.encode(), row.event_id)
                await self._send(body_chunk(body))
                sent = row.seq

    async def send(self, message: dict[str, Any]) -> None:
        """A server-initiated message for this session's GET stream (from any worker)."""
        if self.attached and not self.closed:
            try:
                body = self.log.event(encode_message(message))
            except JSONRPCError as exc:  # nobody to tell: the message is dropped, the stream goes on
                logger.warning("a message for session %s was dropped: %s", self.session_id, exc)
                return
            await self._send(body_chunk(body))

    def close(self, reason: str) -> None:
        """The session ended (on any worker), the server is shutting down, or the credential no longer
        authenticates: finish the GET stream (nothing more is sent on it)."""
        self.closed = True
        self.ended.set()
