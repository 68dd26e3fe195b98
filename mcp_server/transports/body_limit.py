"""``MAX_REQUEST_BYTES`` enforced by Daphne itself, before a body is read.

Daphne (Twisted) reads a request's whole body, into memory or a temporary file, before the application is
called, then queues all of it at once: the consumer's own check comes after the bytes are in. For the MCP
endpoints' paths, :func:`limit_daphne_bodies` makes Daphne's request refuse a body at once when its
``Content-Length`` is over the limit (or as soon as a chunked body's running count passes it): it answers
413 with the JSON-RPC error the consumer would send, ``Connection: close``, keeps nothing of what follows
and discards it only while the connection lingers (``LINGER`` seconds, so that a client still sending reads
its 413 instead of a reset), then closes. Other paths, and other servers (Uvicorn, Hypercorn, which call
the application before the body), are left alone.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote, urlsplit

from ..conf import mcp_settings
from ..wire.jsonrpc import dumps

__all__ = ["LINGER", "limit_daphne_bodies", "limited_path"]

logger = logging.getLogger("mcp_server.http")

LINGER = 5.0
"""Seconds a refused connection is kept open (its input discarded) before it is closed."""


def limited_path(target: bytes, paths: frozenset[str]) -> bool:
    """Whether a request target (origin or absolute form) names one of the MCP ``paths`` (``/mcp``; ``""``
    for the root), with or without a trailing slash, also under a prefix (a root path, a nested router)."""
    raw = target.decode("latin-1")
    if "://" in raw:
        raw = urlsplit(raw).path
    path = unquote(raw.split("?", 1)[0]).rstrip("/")
    return any(path == p or (p and path.endswith(p)) for p in paths)


def _refusal(limit: int) -> bytes:
    body = dumps(
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32600, "message": f"Request body larger than {limit} bytes"},
        }
    )
    head = (
        "HTTP/1.1 413 Content Too Large\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


def _discard(*args: Any) -> None:
    """What a refused connection does with its input."""


def _bounded(base: type[Any], paths: frozenset[str]) -> type[Any]:
    """A subclass of Daphne's request class that refuses over-limit bodies on ``paths``."""

    class BoundedWebRequest(base):  # type: ignore[misc]
        mcp_paths = paths
        _mcp_limit: int | None = None
        _mcp_received = 0
        _mcp_refused = False

        def gotLength(self, length: int | None) -> None:
            target = getattr(self.channel, "_path", b"")
            if isinstance(target, bytes) and limited_path(target, self.mcp_paths):
                self._mcp_limit = int(mcp_settings.MAX_REQUEST_BYTES)
                # A JSON-RPC body is never a form: Twisted would parse the Content-Type header through the
                # ``email`` package on every POST (about 5% of a write call's CPU) only to fill
                # ``request.args``, which Daphne does not read.
                self._parsePOSTFormSubmission = False
            if self._mcp_limit is not None and length is not None and length > self._mcp_limit:
                self._mcp_refuse(f"Content-Length {length}")
                return
            super().gotLength(length)

        def handleContentChunk(self, data: bytes) -> None:
            if self._mcp_refused:
                return
            if self._mcp_limit is not None:
                self._mcp_received += len(data)
                if self._mcp_received > self._mcp_limit:
                    self._mcp_refuse(f"more than {self._mcp_limit} bytes received")
                    return
            super().handleContentChunk(data)

        def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
            if not self._mcp_refused:  # a refused request never reaches the application
                super().requestReceived(command, path, version)

        def _mcp_refuse(self, why: str) -> None:
            self._mcp_refused = True
            limit = self._mcp_limit or 0
            target = getattr(self.channel, "_path", b"")
            logger.info("refused a request body to %r: %s (MAX_REQUEST_BYTES %d)", target, why, limit)
            content = getattr(self, "content", None)
            if content is not None:
                content.close()  # what was kept of a chunked body, up to the limit
            self.content = io.BytesIO()
            self.requestHeaders.removeHeader(b"expect")  # no "100 Continue" after the answer
            channel, transport = self.channel, self.channel.transport
            channel.dataReceived = channel.rawDataReceived = channel.lineReceived = _discard
            transport.write(_refusal(limit))
            try:  # the client reads the answer, then the end; its input still goes nowhere
                transport.loseWriteConnection()
            except Exception:  # a transport that cannot half-close (some TLS wrappers): closed after LINGER
                logger.debug("could not half-close a refused connection", exc_info=True)
            from twisted.internet import reactor

            clock: Any = reactor  # an IReactorTime (zope's interfaces do not type-check as classes)
            clock.callLater(LINGER, _close, transport)

    return BoundedWebRequest


def _close(transport: Any) -> None:
    if getattr(transport, "connected", False):
        transport.abortConnection()


def limit_daphne_bodies(paths: Iterable[str]) -> bool:
    """Make Daphne's HTTP requests refuse over-limit bodies on ``paths`` (``"/mcp"``, ...) before reading
    them; returns whether Daphne is there to be told. Called by :func:`~mcp_server.routing.mcp_urlpatterns`
    for the paths it routes (each call adds its own)."""
    try:
        from daphne import http_protocol
    except ImportError:
        return False
    current: Any = http_protocol.WebRequest
    known: frozenset[str] = getattr(current, "mcp_paths", frozenset())
    wanted = known | {("/" + p.strip("/")).rstrip("/") for p in paths}
    if wanted != known:
        base = current.__mro__[1] if known else current
        http_protocol.WebRequest = _bounded(base, frozenset(wanted))
    return True
