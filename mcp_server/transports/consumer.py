"""The Streamable HTTP endpoint as a Channels consumer: POST, GET (standalone SSE stream, served by
:mod:`~mcp_server.transports.get_stream`) and DELETE.

One consumer instance serves one HTTP exchange. It has no channel-layer name of its own: what other worker
processes send (a cancel, a session's end, messages for a GET stream) reaches the process's runtime, which
holds the exchange's requests and streams. Nor does it close old database connections on every ASGI
message, as Channels' consumers do (with ``CONN_MAX_AGE`` 0 that would open a connection per message). The
request path does query the database: authentication (a token and its user, the cookie session), the session
lookup and its quota, and handlers. Their connections are kept sound where they are used instead:

- the request path's own queries run under :func:`~mcp_server.core.stores.bounded`, which drops the ORM
  thread's connection when a query fails on it (a restarted server), so the next one reconnects;
- a sync handler runs between two ``close_old_connections()`` in its worker thread
  (:mod:`mcp_server.registry.signature`), as a Django view runs between a request's signals;
- a write's ``atomic`` block closes a connection whose rollback failed.

``tests/end_to_end/test_store_faults.py`` restarts PostgreSQL under token-authenticated reads and form writes
and sees every thread recover.
"""

from __future__ import annotations

import asyncio
import io
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from channels.consumer import AsyncConsumer
from django.contrib.auth.models import AnonymousUser
from django.core.handlers.asgi import ASGIRequest

from ..auth import Unauthorized, authenticate_request
from ..conf import mcp_settings
from ..core.asgi_request import LazyASGIRequest
from ..core.context import SessionState
from ..core.stores import StoreUnavailable, is_unavailable
from ..registry.server import MCPServer
from ..runtime import Runtime, get_runtime
from ..wire.asgi import (
    Header,
    body_end,
    header,
    send_empty_response,
    send_json_response,
)
from ..wire.errors import INTERNAL_ERROR, JSONRPCError
from ..wire.jsonrpc import encode_reply, error_response
from ..wire.versions import BATCH_VERSIONS, DEFAULT_HEADER_VERSION, SUPPORTED_VERSIONS
from .exchange import PostExchange
from .get_stream import GetStream, open_log
from .post import HANDSHAKE_HEADER, parse_post
from .resumable import serve_resumed
from .rules import Headers, HTTPProblem, accepts, check_origin_and_host, headers_of
from .shutdown import install_shutdown_hooks
from .v2026_07_28 import ALLOW_POST, SessionlessPost, is_sessionless_post, sessionless_not_allowed

__all__ = ["MCPConsumer"]

logger = logging.getLogger("mcp_server.http")

Receive = Callable[[], Awaitable[dict[str, Any]]]
SESSION_HEADER = "mcp-session-id"
_SESSION_ID = re.compile(r"[\x21-\x7e]{1,64}")
"""What a session id can be: visible ASCII (as the spec says) that fits the session table's key."""


class MCPConsumer(AsyncConsumer):  # type: ignore[misc]
    """Serves one MCP server at one URL."""

    def __init__(self, server: MCPServer, runtime: Runtime | None = None) -> None:
        self.server = server
        self.runtime = runtime if runtime is not None else get_runtime()
        self.disconnected = False
        self.response_started = False
        self.task: asyncio.Task[Any] | None = None
        """The task serving this exchange (what a shutdown waits for)."""
        self._stream_closed: asyncio.Event | None = None
        self.user: Any = None
        self.auth: Any = None
        self.sink: GetStream | None = None
        """While this consumer serves a GET stream (it refers back to the consumer: dropped at the end, so
        that no cycle keeps a consumer and its body until a full garbage collection)."""
        self.exchange: PostExchange | None = None
        self.headers: Headers = {}
        """The request's headers by lower-case name (repeated ones joined with commas)."""
        self._receive: Receive | None = None
        self._watching: asyncio.Task[None] | None = None

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Any) -> None:
        self.scope = scope
        self.base_send = send
        self.headers = headers_of(scope.get("headers", []))
        if _declared_length(self.headers) > mcp_settings.MAX_REQUEST_BYTES:  # refused before it is read
            await self._problem(_too_large())
            return
        if not (self.runtime.is_started() and self.runtime.shutdown_hooked):
            await self.runtime.start()
            install_shutdown_hooks(self.runtime)
        body = await self._read_body(receive)
        if body is None:
            return
        # Served in a task of its own: a server that kills its applications (Daphne, at its stop or once
        # a client has been gone a while) must not cut short a response that the runtime's shutdown or a
        # resumable stream's hand-over is still finishing. One more task waits for the client's going
        # (which ends a GET stream and cancels a 2026-07-28 request), from the moment the exchange waits
        # (:meth:`watch_disconnect`): a request answered at once has nothing to be cancelled.
        self._receive = receive
        self.task = serving = asyncio.get_running_loop().create_task(self._serve(body))
        try:
            await asyncio.shield(serving)
        finally:
            if self._watching is not None:
                self._watching.cancel()

    def watch_disconnect(self) -> None:
        """Start waiting for the client's going, once: when a POST's exchange first waits for an answer
        and when a GET stream opens (until then nothing reads the connection's messages)."""
        if self._watching is None and self._receive is not None:
            self._watching = asyncio.ensure_future(self._watch_disconnect(self._receive))

    @property
    def stream_closed(self) -> asyncio.Event:
        """Set once the client has gone: what a GET stream waits on (made when one asks, not per POST)."""
        if self._stream_closed is None:
            self._stream_closed = asyncio.Event()
            if self.disconnected:
                self._stream_closed.set()
        return self._stream_closed

    async def send(self, message: dict[str, Any]) -> None:
        """Send to the client unless it has gone; a vanished client is not an error here."""
        if self.disconnected:
            return
        if message["type"] == "http.response.start":
            self.response_started = True
        try:
            await self.base_send(message)
        except Exception:  # the connection went away under us
            self.disconnected = True

    # -- ASGI events ---------------------------------------------------------------------------------

    async def _read_body(self, receive: Receive) -> bytes | None:
        """The whole body, or ``None`` when the client left first or the body passed ``MAX_REQUEST_BYTES``
        (answered 413 as soon as the bytes received pass it: nothing more is read or kept). (A
        ``Content-Length`` over it is refused before the first read, in ``__call__``; under Daphne, which
        reads a whole body before calling the application, :mod:`~mcp_server.transports.body_limit`
        refuses both earlier still.)"""
        limit = mcp_settings.MAX_REQUEST_BYTES
        gathered = bytearray()
        while True:
            message = await receive()
            kind = message["type"]
            if kind == "http.disconnect":
                self.disconnected = True
                return None
            if kind != "http.request":
                continue
            chunk = message.get("body", b"")
            if len(gathered) + len(chunk) > limit:
                await self._problem(_too_large())
                return None
            gathered += chunk
            if not message.get("more_body"):
                return bytes(gathered)

    async def _watch_disconnect(self, receive: Receive) -> None:
        """Wait for the client to go: a GET stream ends; a POST's requests still run to settlement, but
        closing the response of a 2026-07-28 request is its cancellation."""
        while (await receive())["type"] != "http.disconnect":
            pass
        self.disconnected = True
        if self._stream_closed is not None:
            self._stream_closed.set()
        if self.exchange is not None and self.exchange.sessionless:
            await self.exchange.cancel_open()

    # -- methods ---------------------------------------------------------------------------------------

    async def _serve(self, body: bytes) -> None:
        self.runtime.exchanges.add(self)
        try:
            await self._route(body)
        finally:
            self.runtime.exchanges.discard(self)
            self.exchange = None  # it holds our send: no cycle keeps the request after its answer

    async def _route(self, body: bytes) -> None:
        headers = self.headers
        method = self.scope.get("method", "GET").upper()
        try:
            check_origin_and_host(headers)
            request = LazyASGIRequest(self.scope, io.BytesIO(body), headers)
            if method in ("POST", "GET", "DELETE"):
                await self._authenticate(request)
            if method == "POST" and is_sessionless_post(headers, body):
                await self._sessionless_post(headers, body, request)
            elif method == "POST":
                await self._post(headers, body, request)
            elif method in ("GET", "DELETE") and sessionless_not_allowed(headers, method):
                raise HTTPProblem(
                    405, f"Method Not Allowed: {method} has no meaning at 2026-07-28", headers=ALLOW_POST
                )
            elif method == "GET":
                await self._get(headers)
            elif method == "DELETE":
                await self._delete(headers)
            else:
                raise HTTPProblem(405, f"Method {method} not allowed")
        except HTTPProblem as problem:
            await self._problem(problem)
        except Exception as exc:
            if is_unavailable(exc):  # I11: a store that cannot answer is a 503, never a hang or a 500
                await self._unavailable(exc)
                return
            logger.exception("MCP endpoint failed")
            if not self.response_started:
                error = JSONRPCError(INTERNAL_ERROR, f"Internal error: {type(exc).__name__}")
                await self._json(500, error_response(None, error))
            else:
                await self.send(body_end())

    async def _authenticate(self, request: ASGIRequest) -> None:
        """Who is calling (``self.user``, ``self.auth``); 401 with ``WWW-Authenticate`` when refused."""
        resource_path = self.scope.get("path", "/mcp").rstrip("/") or "/"
        try:
            self.user, self.auth = await authenticate_request(request, resource_path=resource_path)
        except Unauthorized as exc:
            challenges = [header("www-authenticate", c) for c in exc.challenges]
            raise HTTPProblem(401, exc.message, headers=challenges) from exc

    def _owns(self, user_id: int | None) -> bool:
        """A session belongs to the user who opened it (anonymous ones to anonymous callers)."""
        user = self.user
        caller = user.pk if user is not None and getattr(user, "is_authenticated", False) else None
        return bool(user_id == caller)

    async def _session(self, headers: Headers) -> SessionState:
        header_version = headers.get(HANDSHAKE_HEADER)
        if header_version is not None and header_version not in SUPPORTED_VERSIONS:
            raise HTTPProblem(400, f"Bad Request: unsupported MCP-Protocol-Version {header_version!r}")
        if mcp_settings.STATELESS:
            return SessionState(id=None, protocol_version=header_version or DEFAULT_HEADER_VERSION)
        session_id = headers.get(SESSION_HEADER)
        if not session_id:
            raise HTTPProblem(400, "Bad Request: Mcp-Session-Id header is required", code=-32000)
        if not _SESSION_ID.fullmatch(session_id):  # not one this server issues: no store is asked
            raise HTTPProblem(404, "Session not found", code=-32001)
        cached = await self.runtime.sessions.aget_active(session_id, self.server.key)
        if cached is None or not self._owns(cached.user_id):  # another user's session is as good as unknown
            raise HTTPProblem(404, "Session not found", code=-32001)
        return cached.state

    async def _post(self, headers: Headers, body: bytes, request: ASGIRequest) -> None:
        messages, is_batch, initialize = parse_post(headers, body)
        user = self.user if self.user is not None else AnonymousUser()
        request.user = user
        request.auth = self.auth  # type: ignore[attr-defined]  # as DRF names it: the token, if any
        if initialize is not None:  # alone in its body (parse_post): it opens the session
            session = SessionState(id=None, protocol_version=DEFAULT_HEADER_VERSION)
        else:
            session = await self._session(headers)
        if is_batch and session.protocol_version not in BATCH_VERSIONS:
            raise HTTPProblem(
                400,
                f"Invalid Request: protocol version {session.protocol_version} does not allow batches",
            )
        exchange = PostExchange(
            runtime=self.runtime,
            server=self.server,
            session=session,
            mode=mcp_settings.RESPONSE_MODE,
            send=self.send,
            is_batch=is_batch,
            request=request,
            user=user,
            stateless=mcp_settings.STATELESS,
            is_open=lambda: not self.disconnected,
            waiting=self.watch_disconnect,
        )
        await exchange.run(messages)

    async def _sessionless_post(self, headers: Headers, body: bytes, request: ASGIRequest) -> None:
        """A 2026-07-28 POST: one request, served statelessly under the reply guarantee."""
        reading = SessionlessPost(self.server, self.scope.get("headers", []))
        message, session = await reading.read(headers, body, self.runtime, self.user, self.auth)
        if message is None:
            await send_empty_response(self.send, 202)
            return
        user = self.user if self.user is not None else AnonymousUser()
        request.user = user
        request.auth = self.auth  # type: ignore[attr-defined]
        # subscriptions/listen is answered with a stream whatever RESPONSE_MODE says (its answer IS one)
        listen = message.method == "subscriptions/listen"
        self.exchange = exchange = PostExchange(
            runtime=self.runtime,
            server=self.server,
            session=session,
            mode="sse" if listen else mcp_settings.RESPONSE_MODE,
            send=self.send,
            is_batch=False,
            request=request,
            user=user,
            stateless=True,
            waiting=self.watch_disconnect,
        )
        if not listen:
            await exchange.run([message])
            return

        async def end(reason: str) -> None:  # as at shutdown: answered with its complete result
            await self.runtime.listeners.finish(exchange.entries, drop=True)

        watching = self._watch_credential(end)
        try:
            await exchange.run([message])
        finally:
            if watching is not None:
                watching.cancel()

    async def _get(self, headers: Headers) -> None:
        if mcp_settings.STATELESS:
            raise HTTPProblem(405, "Method Not Allowed: this endpoint is stateless (no standalone stream)")
        if not accepts(headers, "text/event-stream"):
            raise HTTPProblem(406, "Not Acceptable: the client must accept text/event-stream")
        session = await self._session(headers)
        assert session.id is not None
        self.watch_disconnect()
        last_event_id = headers.get("last-event-id")
        if last_event_id and not last_event_id.strip(" \t").startswith("g"):  # a POST stream's missed events
            await serve_resumed(self.runtime, session.id, last_event_id, self.send, self.stream_closed)
            return
        log = await open_log(self.runtime, session, last_event_id)
        self.sink = stream = GetStream(self.runtime, session.id, log, self.send, self.stream_closed)
        watching = self._watch_credential(self._end_get)
        try:
            await stream.serve(last_event_id)
        finally:
            if watching is not None:
                watching.cancel()
            self.sink = None
            await stream.leave()
        await self.send(body_end())

    async def _delete(self, headers: Headers) -> None:
        if mcp_settings.STATELESS:
            raise HTTPProblem(405, "Method Not Allowed: this endpoint is stateless (no sessions to end)")
        session = await self._session(headers)
        assert session.id is not None
        await self.runtime.end_session(session.id, "session terminated by the client")
        await send_empty_response(self.send, 200)

    # -- helpers ---------------------------------------------------------------------------------------

    def _watch_credential(self, end: Callable[[str], Awaitable[None]]) -> asyncio.Task[None] | None:
        """Check the credential of this stream again while it is open; ``end`` it when refused (see
        :mod:`mcp_server.runtime.credentials`). Cancel the task when the stream ends."""
        return self.runtime.credentials.watch(self.scope, self.user, self.auth, end)

    async def _end_get(self, reason: str) -> None:
        if self.sink is not None:
            self.sink.close(reason)

    async def _json(self, status: int, payload: dict[str, Any], extra: list[Header] | None = None) -> None:
        await send_json_response(self.send, status, encode_reply(payload).data, extra or ())

    async def _problem(self, problem: HTTPProblem) -> None:
        extra = [(b"allow", b"GET, POST, DELETE")] if problem.status == 405 and not problem.headers else []
        extra += problem.headers
        error = JSONRPCError(problem.code, problem.message, problem.data)
        await self._json(problem.status, error_response(problem.request_id, error), extra)

    async def _unavailable(self, exc: Exception) -> None:
        """503 with ``Retry-After`` (or the end of a response already started) for a store that failed."""
        message = (
            exc.message if isinstance(exc, StoreUnavailable) else f"Store unavailable: {type(exc).__name__}"
        )
        logger.warning("MCP endpoint answered 503: %s", message)
        if self.response_started:
            await self.send(body_end())
            return
        retry = [(b"retry-after", b"1")]
        await self._problem(
            HTTPProblem(503, f"Service Unavailable: {message}", code=INTERNAL_ERROR, headers=retry)
        )


def _too_large() -> HTTPProblem:
    return HTTPProblem(413, f"Request body larger than {mcp_settings.MAX_REQUEST_BYTES} bytes", code=-32600)


def _declared_length(headers: Headers) -> int:
    """The request's ``Content-Length`` (0 when absent, repeated or unreadable: the running count decides)."""
    value = headers.get("content-length", "")
    return int(value) if value.isascii() and value.isdigit() else 0
