"""``Context``: what a handler can ask of the request it serves."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from asgiref.sync import async_to_sync
from django.db import DEFAULT_DB_ALIAS

from ..wire.apps import client_supports_apps
from ..wire.errors import INTERNAL_ERROR, JSONRPCError
from ..wire.jsonrpc import RequestId, encodable
from ..wire.versions import is_sessionless_version
from .interfaces import ProcessView, ServerView
from .rounds import INPUT_METHODS, InputRequest, InputRounds, readable_answer
from .tasks import Detach

if TYPE_CHECKING:
    from django.http import HttpRequest

__all__ = ["LOG_LEVELS", "AnswerClaim", "Context", "MethodHandler", "Peer", "SessionState", "client_label"]

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


class AnswerClaim(Protocol):
    """How a handler makes its request's answer certain before its writes commit (``claim_answer``)."""

    async def reserve(self, using: str | None) -> None:
        """On the event loop: from now on only the handler answers the request (no cancel, deadline, abort
        or end of session settles it any more). Raises ``RequestSettled`` if one already did. ``using``: the
        database whose transaction :meth:`confirm` will run in (``None``: none)."""

    def confirm(self, using: str) -> None:
        """In the handler's thread, inside its transaction on database ``using``: record the answer in that
        transaction where the ledger can (the database ledger on the same database). Raises
        ``RequestSettled`` if another worker settled the request meanwhile."""


class Peer(Protocol):
    """The transport's side of one request: where its related messages go."""

    async def notify(self, message: dict[str, Any]) -> None:
        """Send a notification related to the request (on its stream, if it has one)."""

    async def request(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        """Send a server-to-client request and wait for the client's result."""


@dataclass
class SessionState:
    """What the server knows of the client's session while a request runs."""

    id: str | None
    protocol_version: str
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    client_info: dict[str, Any] = field(default_factory=dict)
    log_level: str | None = None

    @property
    def client_label(self) -> str:
        """``"name version"`` from the client's ``clientInfo`` (empty when it sent none)."""
        return client_label(self.client_info)

    @property
    def sessionless(self) -> bool:
        """Whether the request speaks the sessionless revision (2026-07-28: per-request ``_meta``, no
        sessions, no requests to the client). The one test of it: every layer asks this."""
        return is_sessionless_version(self.protocol_version)


def client_label(client_info: Any) -> str:
    """``"name version"`` from a ``clientInfo`` object (empty when it is missing or malformed)."""
    if not isinstance(client_info, dict):
        return ""
    parts = (client_info.get("name"), client_info.get("version"))
    return " ".join(part for part in parts if isinstance(part, str) and part)


@dataclass
class Context:
    """Handed to any handler that declares a parameter annotated ``Context``."""

    server: ServerView
    """The server the request is for (an ``MCPServer``; ``registry.server.server_of(ctx)`` gives it typed)."""
    session: SessionState
    request_id: RequestId
    method: str
    params: dict[str, Any]
    peer: Peer
    request: HttpRequest | None = None
    user: Any = None
    runtime: ProcessView | None = None
    """The worker process's runtime (a ``mcp_server.runtime.Runtime``: pending requests, session cache, ledger
    writer), ``None`` outside one."""
    rounds: InputRounds | None = None
    """2026-07-28 ``tools/call``, ``prompts/get``, ``resources/read``: the answers the request carries."""
    task_id: str | None = None
    """While the handler runs as a task (tasks extension): the task's id."""
    detaching: bool = False
    """The handler of a ``task_start="detach"`` tool runs inside a call that may become a task."""
    claim: AnswerClaim | None = None
    """Set by the protocol layer for a request held in the request table (see ``claim_answer``)."""
    deadline: asyncio.Timeout | None = None
    """While the handler runs under a deadline: its scope (disarmed once the handler claims its answer)."""

    @property
    def session_id(self) -> str | None:
        """The ``Mcp-Session-Id`` of the session, ``None`` when stateless."""
        return self.session.id

    @property
    def meta(self) -> dict[str, Any]:
        """The request's ``_meta``."""
        meta = self.params.get("_meta")
        return meta if isinstance(meta, dict) else {}

    @property
    def progress_token(self) -> str | int | None:
        """The client's ``progressToken`` (a string or an integer, not a bool), if it asked for progress.

        ``None`` also for a string JSON cannot carry back (a lone UTF-16 surrogate: valid in the request's
        JSON, not in UTF-8): no progress can reach the client under it, and the request is served without.
        """
        token = self.meta.get("progressToken")
        if isinstance(token, bool) or not isinstance(token, str | int):
            return None
        return token if isinstance(token, int) or encodable(token) else None

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Send ``notifications/progress`` when the client supplied a progress token; otherwise nothing."""
        token = self.progress_token
        if token is None:
            return
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.peer.notify({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})

    async def close_stream(self) -> bool:
        """Close the response stream of this request now, so that the client polls for the rest with
        ``Last-Event-ID`` (SEP-1699; handshake era, a session, a streamed response). The handler goes on;
        what it sends later, its result among them, reaches the client on the resumed stream. Returns
        ``False`` where there is no stream to close (stdio, JSON responses, 2026-07-28)."""
        closer = getattr(self.peer, "close_stream", None)
        return bool(await closer()) if closer is not None else False

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send ``notifications/message`` if ``level`` is at or above the level the client set."""
        if level not in LOG_LEVELS:
            raise ValueError(f"unknown log level {level!r}")
        threshold = self.session.log_level
        if threshold is None or LOG_LEVELS.index(level) < LOG_LEVELS.index(threshold):
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger:
            params["logger"] = logger
        await self.peer.notify({"jsonrpc": "2.0", "method": "notifications/message", "params": params})

    async def debug(self, data: Any) -> None:
        """``log("debug", data)``."""
        await self.log("debug", data)

    async def info(self, data: Any) -> None:
        """``log("info", data)``."""
        await self.log("info", data)

    async def warning(self, data: Any) -> None:
        """``log("warning", data)``."""
        await self.log("warning", data)

    async def error(self, data: Any) -> None:
        """``log("error", data)``."""
        await self.log("error", data)

    @property
    def sessionless(self) -> bool:
        """Whether the request speaks the sessionless revision (2026-07-28: no sessions, no requests to the
        client); :attr:`SessionState.sessionless` of its session."""
        return self.session.sessionless

    @property
    def client_supports_apps(self) -> bool:
        """Whether the client declared MCP Apps (``io.modelcontextprotocol/ui`` with the
        ``text/html;profile=mcp-app`` MIME type): its host renders the tool's view. At ``initialize`` in the
        handshake era, in the request's ``clientCapabilities`` at 2026-07-28. A tool with a view returns the
        same meaningful ``content`` either way; this tells it whether a view will show the result."""
        return client_supports_apps(self.session.client_capabilities)

    @property
    def modern(self) -> bool:
        """Deprecated alias of :attr:`sessionless`."""
        warnings.warn(
            "Context.modern is deprecated; use Context.sessionless.", DeprecationWarning, stacklevel=2
        )
        return self.sessionless

    async def detach(self) -> None:
        """Go on as a task (tools registered with ``task_start="detach"``): the call is answered with a task
        and the handler runs again, as the task, from the start, with the input answers given so far (its
        asks are answered from them, so it passes this point at once). Outside such a call (a handshake-era
        session, a call without the tasks extension, or in the task itself) it returns at once."""
        if self.detaching:
            raise Detach()

    def claim_answer(self, using: str | None = None) -> None:
        """Make the request's answer certain before a write commits; sync handlers, in their worker thread.

        Call it inside the ``transaction.atomic(using=...)`` block that holds the handler's writes, as its
        last statement. If the request was already cancelled, timed out, aborted or its session closed, it
        raises :class:`~mcp_server.wire.errors.RequestSettled` and the transaction rolls back.
        Otherwise the request can no longer be cancelled, time out or be closed: the handler's result is its
        answer (sent if anyone can still receive it, recorded as answered). With the database ledger on the
        same database, the answered record is written in the transaction itself, so that even a worker killed
        at the commit leaves the change and its record together or neither. It never waits for the ledger
        writer (whose batch may need the locks the transaction holds). On SQLite, open the block with
        :func:`mcp_server.write_transaction` (or set ``"transaction_mode": "IMMEDIATE"``): a deferred
        transaction that reads first fails at once while another connection writes.
        """
        if self.claim is None:  # not served through the request table (a test calling a handler directly)
            return
        alias = using or DEFAULT_DB_ALIAS
        async_to_sync(self.claim.reserve)(alias)
        self.claim.confirm(alias)

    async def aclaim_answer(self) -> None:
        """The async twin of :meth:`claim_answer`, for a handler that commits its effect itself (an external
        call, say) after awaiting it: no transaction is joined, so a crash after the commit may lose the
        record."""
        if self.claim is not None:
            await self.claim.reserve(None)

    def _require(self, capability: str) -> None:
        if capability not in self.session.client_capabilities:
            raise JSONRPCError(-32600, f"The client did not declare the {capability!r} capability")

    def _input_rounds(self) -> InputRounds:
        if self.rounds is None:
            raise JSONRPCError(
                INTERNAL_ERROR,
                f"{self.method} cannot ask the client for input at {self.session.protocol_version}: only "
                f"{', '.join(sorted(INPUT_METHODS))} can",
            )
        return self.rounds

    async def input_round(self, requests: Mapping[str, InputRequest]) -> dict[str, dict[str, Any]]:
        """Ask the client several things at once; returns each result by its key.

        Handshake era: sends the requests concurrently and waits for every answer. 2026-07-28: one
        ``input_required`` round with all of them (the handler runs again, from the start, on the retry).
        Keys must be unique within the request.
        """
        if self.sessionless:
            return self._input_rounds().take(requests)
        for request in requests.values():
            self._require(request.capability)
        sent = [
            asyncio.ensure_future(self.peer.request(r.method, r.params or None)) for r in requests.values()
        ]
        try:
            return dict(zip(requests, await asyncio.gather(*sent), strict=True))
        finally:  # one failed (or the request ended): the others stop waiting for their answers
            for waiting in sent:
                waiting.cancel()

    async def _ask(self, request: InputRequest, key: str | None) -> dict[str, Any]:
        if self.sessionless:
            rounds = self._input_rounds()
            key = key or rounds.next_key(request)
            return rounds.take({key: request})[key]
        self._require(request.capability)
        answer = await self.peer.request(request.method, request.params or None)
        return readable_answer(request.method, "the client's answer", answer)

    async def elicit(
        self, message: str, requested_schema: dict[str, Any], *, key: str | None = None
    ) -> dict[str, Any]:
        """Ask the user for input (form elicitation); returns ``{"action": ..., "content": ...}``.

        ``key`` names the input request at 2026-07-28 (default: ``elicitation-<n>``, n-th ask of the request).
        """
        return await self._ask(InputRequest.elicitation(message, requested_schema), key)

    async def sample(
        self,
        messages: list[dict[str, Any]] | str,
        *,
        max_tokens: int = 1000,
        system_prompt: str | None = None,
        key: str | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """Ask the client's model for a completion (``sampling/createMessage``)."""
        request = InputRequest.sampling(messages, max_tokens=max_tokens, system_prompt=system_prompt, **extra)
        return await self._ask(request, key)

    async def list_roots(self, *, key: str | None = None) -> list[dict[str, Any]]:
        """The client's roots (``roots/list``)."""
        result = await self._ask(InputRequest.roots(), key)
        roots = result.get("roots", [])
        return roots if isinstance(roots, list) else []


MethodHandler = Callable[[Context], Awaitable[dict[str, Any] | None]]
"""What a server's table of methods holds for each method it answers, built-in or a site's own: the request's
context in, the result object out (``None`` only from a raw method that answers nothing)."""
