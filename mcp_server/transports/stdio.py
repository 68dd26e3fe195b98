"""The stdio transport: one MCP session over a pair of pipes, newline-delimited JSON-RPC (UTF-8).

A thread reads the input and hands complete lines to the event loop; each request is recorded in the
ledger and served in its own task under the reply guarantee (as over HTTP); a single writer puts one
compact JSON message per line on the output (the pipes: :mod:`~mcp_server.transports.stdio_lines`). End of
input, :meth:`StdioLoop.stop` (SIGTERM), or an output nobody reads any more (a write fails), lets in-flight
requests finish for ``SHUTDOWN_GRACE`` seconds, then answers the rest with -32000.

The process's runtime carries what other processes send: an operator's abort, server-initiated
notifications (``list_changed``, ``resources/updated``, routed to this session's stream), and the session's
end in another process, which stops the loop.
"""

from __future__ import annotations

import asyncio
import logging
from typing import IO, Any

from django.utils import timezone

from ..conf import mcp_settings
from ..core.context import SessionState
from ..core.stores import bounded
from ..models import Session
from ..protocol.client_messages import handle_client_message
from ..protocol.peer import RequestPeer
from ..protocol.serving import answer_initialize, start_request
from ..protocol.settlement import CANCELLED, CLOSED, PENDING, PendingRequest, closed_response
from ..registry.server import MCPServer
from ..runtime import Runtime
from ..sessions import LAST_SEEN_EVERY, state_of
from ..wire.errors import INTERNAL_ERROR, INVALID_REQUEST, JSONRPCError
from ..wire.jsonrpc import (
    IncomingMessage,
    JSONRPCRequest,
    decode_body,
    encode_message,
    encode_reply,
    error_response,
    parse_message,
    refusal,
    result_response,
)
from .stdio_era import EraLock
from .stdio_lines import EOF, TOO_LONG, Line, LineWriter, Marker, read_lines

__all__ = ["EOF", "TOO_LONG", "LineWriter", "Marker", "StdioLoop", "read_lines"]

logger = logging.getLogger("mcp_server.stdio")


class _StdioPeer(RequestPeer):
    """Where one request's related messages go: the session's output, while the request is pending."""

    def __init__(self, session: StdioLoop) -> None:
        super().__init__(session.runtime.outbound, session.runtime.channel)
        self.session = session

    @property
    def session_id(self) -> str | None:
        return self.session.state.id if self.session.state is not None else None

    async def emit(self, message: dict[str, Any]) -> bool:
        return bool(await self.session.writer.write(encode_message(message)))


class StdioLoop:
    """One client on a pair of pipes, from ``initialize`` to the end of its input."""

    def __init__(
        self,
        server: MCPServer,
        *,
        runtime: Runtime,
        input_fd: int,
        output: IO[bytes],
        user: Any = None,
        grace: float = 5.0,
    ) -> None:
        self.server = server
        self.runtime = runtime
        self.input_fd = input_fd
        self.user = user
        self.grace = grace
        self.writer = LineWriter(output, on_broken=self._output_gone)
        self.state: SessionState | None = None
        self.era = EraLock(server)
        self.open: set[PendingRequest] = set()
        self.stop_reason: str | None = None
        self._stopping = asyncio.Event()
        self._hurry = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._touched = timezone.now()

    def stop(self, reason: str = "server shutting down") -> None:
        """Stop reading and wind down (SIGTERM); a second call ends the grace period at once."""
        if self._stopping.is_set():
            self._hurry.set()
            return
        self.stop_reason = reason
        self._stopping.set()

    def _output_gone(self) -> None:
        """Nobody reads the output any more: wind down as at the end of input (unless already stopping)."""
        if not self._stopping.is_set():
            self.stop("stdout closed")

    async def run(self) -> str:
        """Serve until end of input, :meth:`stop` or a closed output; returns why it stopped.

        Every request is settled on return.
        """
        await self.runtime.start()
        lines = read_lines(self.input_fd, asyncio.get_running_loop(), int(mcp_settings.MAX_REQUEST_BYTES))
        try:
            while (line := await self._next(lines)) is not EOF:
                await self._handle_line(line)
        finally:
            reason = self.stop_reason or "stdin closed"
            self._stopping.set()  # from now on, stop() ends the grace period
            await self._wind_down(reason)
            if self.state is not None and self.state.id is not None:
                await self.runtime.detach_stream(self.state.id, self)
            self.writer.close()
        return reason

    async def _next(self, lines: asyncio.Queue[Line]) -> Line:
        """The next line, or ``EOF`` once :meth:`stop` is called (a line already read is still served)."""
        if self._stopping.is_set():
            return EOF
        getting = asyncio.ensure_future(lines.get())
        stopping = asyncio.ensure_future(self._stopping.wait())
        await asyncio.wait({getting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if getting.done():
            return getting.result()
        getting.cancel()
        return EOF

    # -- incoming messages -----------------------------------------------------------------------------

    async def _answer(self, response: dict[str, Any]) -> None:
        """Write a response that was not settled through the request table (a refusal, ``initialize``)."""
        await self.writer.write(encode_reply(response).data)

    async def _handle_line(self, line: Line) -> None:
        """Answer or act on one line; whatever the line holds, the loop goes on."""
        try:
            message = await self._read(line)
            if message is not None:
                await self._act(message)
        except Exception:  # a bug, not the client's input: the line still gets its answer
            logger.exception("could not act on a line of input")
            error = JSONRPCError(INTERNAL_ERROR, "Internal error while reading a message")
            await self._answer(error_response(None, error))

    async def _read(self, line: Line) -> IncomingMessage | None:
        """The message a line carries, or ``None`` once the line has been answered with an error."""
        if isinstance(line, Marker):
            limit = mcp_settings.MAX_REQUEST_BYTES
            error = JSONRPCError(INVALID_REQUEST, f"Invalid request: message longer than {limit} bytes")
            await self._answer(error_response(None, error))
            return None
        payload: Any = None
        try:
            payload = decode_body(line)
            if isinstance(payload, list):
                raise JSONRPCError(INVALID_REQUEST, "Invalid request: batches are not supported on stdio")
            return parse_message(payload)
        except JSONRPCError as exc:
            await self._answer(refusal(payload, exc))
            return None

    async def _act(self, message: IncomingMessage) -> None:
        await self._touch()
        try:
            if isinstance(message, JSONRPCRequest):
                await self._request(message)
            elif (cancelled := self.era.cancelled(message)) is not None:
                await self._cancel(cancelled)
            elif self.state is not None:
                await handle_client_message(self.runtime, self.state, message)
            else:
                logger.debug("%s before initialize ignored", type(message).__name__)
        except Exception:  # _request answers or opens an entry; when it raises, it did neither
            logger.exception("could not act on a %s", type(message).__name__)
            if isinstance(message, JSONRPCRequest):
                error = JSONRPCError(INTERNAL_ERROR, f"Internal error while handling {message.method}")
                await self._answer(error_response(message.id, error))

    async def _cancel(self, request_id: Any) -> None:
        """A 2026 client cancelled one of its requests: it is settled cancelled, and nothing is sent."""
        for entry in list(self.open):
            if entry.request_id == request_id and type(entry.request_id) is type(request_id):
                await self.runtime.requests.settle(entry, CANCELLED, None)

    async def _request(self, message: JSONRPCRequest) -> None:
        try:
            sessionless = self.era.session_for(message, initialized=self.state is not None)
        except JSONRPCError as exc:
            await self._answer(error_response(message.id, exc))
            return
        if message.method == "initialize":
            await self._initialize(message)
            return
        session = sessionless or self.state
        if session is None:
            if message.method == "ping":
                await self._answer(result_response(message.id, {}))
            else:
                error = JSONRPCError(INVALID_REQUEST, "Invalid request: send initialize first")
                await self._answer(error_response(message.id, error))
            return
        try:
            entry = await start_request(
                self.runtime,
                message,
                server=self.server,
                session=session,
                peer=_StdioPeer(self),
                deliver=self._deliver,
                user=self.user,
                transport="stdio",
            )
        except JSONRPCError as exc:
            await self._answer(error_response(message.id, exc))
            return
        if entry.state == PENDING:  # a remembered cancel (I9) settled it on arrival: nothing is open
            self.open.add(entry)
            self._idle.clear()

    async def _initialize(self, message: JSONRPCRequest) -> None:
        if self.state is not None:
            error = JSONRPCError(INVALID_REQUEST, "Invalid request: the session is already initialized")
            await self._answer(error_response(message.id, error))
            return
        response, session = await answer_initialize(
            self.runtime, self.server, message, user=self.user, transport="stdio"
        )
        if session is not None and "result" in response:
            self.state = state_of(session)
            try:
                await self.runtime.attach_stream(session.id, self)
            except Exception:
                logger.exception("server-initiated notifications will not reach this session")
            logger.info("stdio session %s opened by %r", session.id, session.client_name or "a client")
        await self._answer(response)

    async def _deliver(self, entry: PendingRequest, response: dict[str, Any] | None) -> None:
        """The one way a response leaves: called once per request by the settlement that wins."""
        if entry.reply is not None:  # encoded once, by the settlement
            await self.writer.write(entry.reply.data)
        self.open.discard(entry)
        if not self.open:
            self._idle.set()

    async def _touch(self) -> None:
        """Keep ``last_seen`` roughly current for the admin (written at most every ``LAST_SEEN_EVERY``)."""
        now = timezone.now()
        if self.state is not None and self.state.id is not None and now - self._touched > LAST_SEEN_EVERY:
            self._touched = now
            try:
                await bounded(Session.objects.filter(pk=self.state.id).aupdate(last_seen=now), "database")
            except Exception:
                logger.exception("could not update last_seen")

    # -- other processes ---------------------------------------------------------------------------------

    async def send(self, message: dict[str, Any]) -> None:
        """A server-initiated notification for this session (from any process)."""
        try:
            data = encode_message(message)
        except JSONRPCError as exc:  # nobody to tell: the message is dropped, the session goes on
            logger.warning("a message for this session was dropped: %s", exc)
            return
        await self.writer.write(data)

    def close(self, reason: str) -> None:
        """The session was ended elsewhere (an operator, another process): stop."""
        if not self._stopping.is_set():
            logger.warning("the session was ended elsewhere: %s", reason)
            self.stop(reason or "session ended")

    # -- the end -----------------------------------------------------------------------------------------

    async def _wind_down(self, reason: str) -> None:
        """End listen streams with their ``complete`` result, let in-flight requests finish within the grace
        period, then answer the rest with -32000."""
        await self.runtime.listeners.finish(list(self.open), grace=self.grace)
        if self.open:
            logger.info("%s: waiting up to %.1fs for %d requests", reason, self.grace, len(self.open))
            hurry = asyncio.ensure_future(self._hurry.wait())
            idle = asyncio.ensure_future(self._idle.wait())
            await asyncio.wait({hurry, idle}, timeout=self.grace, return_when=asyncio.FIRST_COMPLETED)
            hurry.cancel()
            idle.cancel()
        tasks = [entry.task for entry in self.open if entry.task is not None]
        if self.state is not None and self.state.id is not None:
            try:
                await self.runtime.end_session(self.state.id, reason)
            except Exception:
                logger.exception("could not end session %s", self.state.id)
        for entry in list(self.open):  # whatever ending the session could not reach
            await self.runtime.requests.settle(entry, CLOSED, closed_response(entry.request_id, reason))
        # A settlement won elsewhere (the session's end arriving over the channel layer) may still be writing
        # its reply: the output is closed only once every reply is out.
        await asyncio.wait([asyncio.ensure_future(self._idle.wait())], timeout=1.0)
        if tasks:
            await asyncio.wait(tasks, timeout=1.0)
