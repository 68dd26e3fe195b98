"""One POST: runs its requests under the reply guarantee and frames their answers as JSON or SSE.

Response modes: ``json`` (one body), ``sse`` (a stream), ``auto`` (headers held until the first message:
the final response alone goes out as JSON; a notification or a server-to-client request switches the
response to a stream).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from ..auth.oauth import insufficient_scope_challenge
from ..conf import mcp_settings
from ..core.asgi_request import client_address
from ..core.context import SessionState
from ..protocol.client_messages import handle_client_message
from ..protocol.peer import RequestPeer
from ..protocol.serving import answer_initialize, start_request
from ..protocol.settlement import CANCELLED, PendingRequest
from ..registry.server import MCPServer
from ..runtime import Runtime
from ..sessions import acount_open_sessions
from ..wire.asgi import (
    Header,
    Send,
    body_chunk,
    body_end,
    content_length,  # re-exported: it was defined here
    header,
    response_start,
    send_empty_response,
    send_json_response,
)
from ..wire.errors import INSUFFICIENT_SCOPE, INVALID_REQUEST, JSONRPCError
from ..wire.jsonrpc import IncomingMessage, JSONRPCRequest, encode_message, encode_reply, error_response
from ..wire.v2026_07_28 import http_status
from . import sse
from .inbox import Inbox
from .resumable import EventLog
from .rules import HTTPProblem

__all__ = ["PostExchange", "Send", "check_session_quota", "content_length"]


class _ExchangePeer(RequestPeer):
    """Where one request's related messages go: onto its own POST's response."""

    def __init__(self, exchange: PostExchange) -> None:
        super().__init__(exchange.runtime.outbound, exchange.runtime.channel)
        self.exchange = exchange

    @property
    def session_id(self) -> str | None:
        return self.exchange.session.id

    async def emit(self, message: dict[str, Any]) -> bool:
        self.exchange.queue.put_nowait(("message", encode_message(message), ""))
        return True

    async def close_stream(self) -> bool:
        """Close the POST's stream now so that the client polls (SEP-1699): the request goes on, its later
        messages wait in the event store for the client's ``GET`` with ``Last-Event-ID``."""
        if not self.exchange.resumable:
            return False
        self.exchange.queue.put_nowait(("poll", b"", ""))
        return True

    async def request(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        if self.exchange.sessionless:  # 2026-07-28: no server-to-client request on any stream
            raise JSONRPCError(INVALID_REQUEST, f"{method} cannot be sent to a 2026-07-28 client")
        if self.exchange.mode == "json":
            raise JSONRPCError(
                INVALID_REQUEST, f"{method} needs a streamed response; RESPONSE_MODE is 'json'"
            )
        return await super().request(method, params)


async def check_session_quota(user: Any, address: str) -> None:
    """429 when ``MAX_SESSIONS_PER_CLIENT`` is set and the caller already holds that many open sessions (an
    authenticated user counted as such, anonymous callers by address; no address, no limit)."""
    limit = mcp_settings.MAX_SESSIONS_PER_CLIENT
    authenticated = bool(getattr(user, "is_authenticated", False))
    if not limit or not (authenticated or address):
        return
    held = await acount_open_sessions(user=user, address=address)
    if held >= limit:
        who = "this user" if authenticated else f"address {address}"
        raise HTTPProblem(
            429,
            f"Too many open sessions for {who}: {held}, at most {limit} (MAX_SESSIONS_PER_CLIENT); end one "
            "with DELETE or let it expire",
        )


class PostExchange:
    """The requests of one POST body, from dispatch to the last byte of the HTTP response."""

    def __init__(
        self,
        *,
        runtime: Runtime,
        server: MCPServer,
        session: SessionState,
        mode: str,
        send: Send,
        is_batch: bool,
        request: Any = None,
        user: Any = None,
        headers: list[Header] | None = None,
        stateless: bool = False,
        is_open: Callable[[], bool] | None = None,
        waiting: Callable[[], None] | None = None,
    ) -> None:
        self.runtime = runtime
        self.server = server
        self.session = session
        self.mode = mode
        self.send = send
        self.is_batch = is_batch
        self.request = request
        self.user = user
        self.headers = list(headers or [])
        self.stateless = stateless
        self.is_open = is_open or (lambda: True)
        """Whether the client is still there to read the response."""
        self.waiting = waiting
        """Called once, when this exchange first waits for a message that is not there yet (the consumer
        then starts watching for the client's going)."""
        self.status = 200
        self.challenged = False
        """The one request of this POST was refused for the token's scopes: answered 403 with the
        ``insufficient_scope`` challenge (its JSON-RPC error as the body), never as a stream."""
        self.entries: list[PendingRequest] = []
        self.keys: list[str] = []
        """The stored ids of the requests this POST started (a stream's rows in the event store)."""
        self.queue: Inbox[tuple[str, bytes, str]] = Inbox()
        """``("reply", bytes, key)`` a response, ``("message", bytes, "")`` a notification or a
        server-to-client request (in ``auto`` mode the first one turns the response into a stream),
        ``("settled", b"", "")``, ``("poll", b"", "")`` close the stream now so that the client polls."""
        self.log: EventLog | None = None
        """The event ids and the stored copy of a handshake-era stream (with a session)."""
        self._poll_timer: asyncio.TimerHandle | None = None
        self.streaming = False
        self._getting: asyncio.Future[tuple[str, bytes, str]] | None = None

    @property
    def sessionless(self) -> bool:
        """A 2026-07-28 request (``SessionState.sessionless``): an error answered as JSON carries its HTTP
        status; closing the response cancels it (:meth:`cancel_open`)."""
        return self.session.sessionless

    @property
    def resumable(self) -> bool:
        """Whether this POST's stream can be resumed with ``Last-Event-ID`` (handshake era, a session)."""
        return not self.sessionless and self.session.id is not None and self.mode != "json"

    async def run(self, messages: list[IncomingMessage | dict[str, Any]]) -> None:
        """Serve ``messages`` (already-built error responses may be mixed in) and send the HTTP response."""
        try:
            open_count = 0
            for message in messages:
                if isinstance(message, dict):  # the refusal of a batch member
                    self._reply(message)
                elif isinstance(message, JSONRPCRequest):
                    open_count += await self._start(message)
                else:
                    await handle_client_message(self.runtime, self.session, message)
            if open_count == 0 and self.queue.empty():
                await self._respond_accepted()
                return
            await self._drain(open_count)
        finally:  # an entry's deliver is our method: no cycle keeps the request past its answer
            self.entries.clear()

    async def _start(self, message: JSONRPCRequest) -> int:
        if message.method == "initialize":
            await self._initialize(message)
            return 0
        try:
            entry = await start_request(
                self.runtime,
                message,
                server=self.server,
                session=self.session,
                peer=_ExchangePeer(self),
                deliver=self._deliver,
                user=self.user,
                request=self.request,
            )
        except JSONRPCError as exc:
            self._reply(error_response(message.id, exc))
            return 0
        if self.sessionless:
            self.entries.append(entry)
        self.keys.append(entry.record.request_key)
        return 1

    async def cancel_open(self) -> None:
        """The client closed the response of a 2026 request: that is its cancellation. Each request still
        open is settled cancelled (its task stopped, nothing more sent)."""
        for entry in self.entries:
            await self.runtime.requests.settle(entry, CANCELLED, None)

    async def _initialize(self, message: JSONRPCRequest) -> None:
        """Open a session: its answer carries the new ``Mcp-Session-Id``, framed like every other answer.

        Raises ``HTTPProblem`` 429 when the caller already holds ``MAX_SESSIONS_PER_CLIENT`` open sessions.
        """
        address = self._client_address()
        if not self.stateless:
            await check_session_quota(self.user, address)
        response, session = await answer_initialize(
            self.runtime,
            self.server,
            message,
            user=self.user,
            stateless=self.stateless,
            client_address=address,
            auth=getattr(self.request, "auth", None),
        )
        if session is not None:
            self.headers.append(header("mcp-session-id", session.id))
        self._reply(response)

    def _reply(self, response: dict[str, Any]) -> None:
        """A response that was not settled through the request table (a refusal, ``initialize``)."""
        self._note_status(response)
        self.queue.put_nowait(("reply", encode_reply(response).data, ""))

    def _client_address(self) -> str:
        """The caller's address as the server saw it (the ASGI scope's ``client``), or ``""``."""
        return client_address(self.request)

    async def _deliver(self, entry: PendingRequest, response: dict[str, Any] | None) -> None:
        if entry.reply is not None:  # encoded once, by the settlement
            self._note_status(entry.reply.message)
            self.queue.put_nowait(("reply", entry.reply.data, entry.record.request_key))
        self.queue.put_nowait(("settled", b"", ""))

    def _note_status(self, response: dict[str, Any]) -> None:
        if "error" not in response:
            return
        error = response["error"]
        code = int(error.get("code", 0))
        if code == INSUFFICIENT_SCOPE and not self.is_batch and not self.streaming and not self.challenged:
            self.status, self.challenged = 403, True
            self.headers.append(header("www-authenticate", self._scope_challenge(error)))
        elif self._answers_429(code, error):
            self.status = 429
            self.headers.append(header("retry-after", str(error["data"]["retryAfter"])))
        elif self.sessionless:
            self.status = http_status(code)

    def _answers_429(self, code: int, error: dict[str, Any]) -> bool:
        """Whether a rate-limit refusal goes out as HTTP 429 with ``Retry-After`` (``RATE_LIMIT_HTTP_429``):
        only when it is the one answer of this POST, sent as JSON (never in a batch or a stream)."""
        if not mcp_settings.RATE_LIMIT_HTTP_429 or code != mcp_settings.RATE_LIMIT_ERROR_CODE:
            return False
        data = error.get("data")
        if not isinstance(data, dict) or not isinstance(data.get("retryAfter"), int):
            return False
        return not self.is_batch and not self.streaming and (self.mode != "sse" or self.sessionless)

    def _scope_challenge(self, error: dict[str, Any]) -> str:
        data = error.get("data")
        data = data if isinstance(data, dict) else {}
        path = str(getattr(self.request, "path", "") or "/mcp").rstrip("/") or "/"
        scope = str(data.get("scope", ""))
        return insufficient_scope_challenge(self.request, path, scope, str(error.get("message", "")))

    # -- framing ---------------------------------------------------------------------------------

    async def _drain(self, open_count: int) -> None:
        held: list[tuple[bytes, str]] = []
        # A 2026-07-28 request and a scope challenge answer with a status, so they open no stream up front.
        if self.mode == "sse" and not self.sessionless and not self.challenged:
            await self._start_stream()
        if self.waiting is not None and self.queue.empty():
            await asyncio.sleep(0)  # the requests' tasks take their first step: a quick answer is in then
        while open_count > 0 or not self.queue.empty():
            if self.waiting is not None and self.queue.empty():
                self.waiting()  # this exchange waits: from now on the client's going is watched
                self.waiting = None
            got = await self._next()
            if got is None:  # a quiet stream: a comment keeps proxies and clients from timing it out
                await self.send(body_chunk(sse.KEEPALIVE))
                continue
            kind, data, key = got
            if kind == "settled":
                open_count -= 1
                continue
            if kind == "poll":
                if self.resumable and open_count > 0:
                    await self._close_for_polling(held)
                    held.clear()
                continue
            if self.streaming:  # the response of the last open request is the stream's final event
                await self._event(data, key, last=bool(key) and open_count == 1)
            elif kind == "reply":
                held.append((data, key))
            elif self.mode in ("auto", "sse"):  # (sse: only a 2026 request gets here unstreamed)
                await self._start_stream()
                for earlier, earlier_key in held:
                    await self._event(earlier, earlier_key)
                held.clear()
                await self._event(data)
        if self._poll_timer is not None:
            self._poll_timer.cancel()
        if self.streaming:
            if self.log is not None:
                await self.log.end()
            if self.log is None or not self.log.detached:  # (a detached stream's response is complete)
                await self.send(body_end())
        elif not held:
            await self._respond_accepted()
        elif self.mode == "sse" and self.status == 200:  # a 2026 result, streamed as this mode says
            await self._start_stream()
            await self._event(*held[0])
            await self.send(body_end())
        else:
            bodies = [data for data, _key in held]
            body = b"[" + b",".join(bodies) + b"]" if self.is_batch else bodies[0]
            await send_json_response(self.send, self.status, body, self.headers)

    async def _next(self) -> tuple[str, bytes, str] | None:
        """The next item of the queue; ``None`` when a 2026 stream stayed quiet for ``KEEPALIVE_INTERVAL``."""
        interval = mcp_settings.KEEPALIVE_INTERVAL
        if not (self.sessionless and self.streaming and interval):
            return await self.queue.get()
        if self._getting is None:  # kept across a quiet spell: an item is never lost to a timeout
            self._getting = asyncio.ensure_future(self.queue.get())
        done, _ = await asyncio.wait({self._getting}, timeout=float(interval))
        if not done:
            return None
        got, self._getting = self._getting.result(), None
        return got

    async def _start_stream(self) -> None:
        self.streaming = True
        await self.send(response_start(200, sse.SSE_HEADERS + self.headers))
        if not self.resumable:
            return
        assert self.session.id is not None
        self.log = EventLog(self.runtime, self.session.id, self.session.protocol_version)
        priming = self.log.priming(self.keys)
        if priming:
            await self.send(body_chunk(priming))
        poll_after = mcp_settings.SSE_POLL_AFTER
        if poll_after is not None:
            self._poll_timer = asyncio.get_running_loop().call_later(
                float(poll_after), self.queue.put_nowait, ("poll", b"", "")
            )

    async def _event(self, data: bytes, key: str = "", *, last: bool = False) -> None:
        log = self.log
        if log is None:
            await self.send(body_chunk(sse.event(data)))
            return
        if not log.detached and not self.is_open():  # the client went away: it may resume elsewhere
            await log.detach()
        if log.detached:
            await log.hand_over(data, key, last=last)
        else:
            body = log.event(data, key, last=last)
            await self.send(body_chunk(body))

    async def _close_for_polling(self, held: list[tuple[bytes, str]]) -> None:
        """End the HTTP response now (SEP-1699): the client comes back with ``Last-Event-ID``; the requests
        go on, their later events wait for it in the event store."""
        if not self.streaming:
            await self._start_stream()
        for data, key in held:
            await self._event(data, key)
        if self.log is None or self.log.detached or not self.log.resumable:
            return  # (before 2025-11-25 a stream that sent nothing yet has no id to resume from: kept open)
        await self.log.detach()
        await self.send(body_end())

    async def _respond_accepted(self) -> None:
        await send_empty_response(self.send, 202, self.headers)
