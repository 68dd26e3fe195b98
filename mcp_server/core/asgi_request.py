"""The Django request of an MCP exchange, built when something first reads it.

Every MCP POST carries a Django ``HttpRequest`` (``ctx.request``: what a handler, a DRF viewset or an
authentication class is given), but most tool calls never read it, and building Django's ``ASGIRequest``
(``META`` from every header, the script prefix, the content type) was a tenth of the request path's time.
:class:`LazyASGIRequest` is that ``ASGIRequest``, with its fields filled in on first use: whatever reads
it sees exactly what Django would have built. :func:`header_value` reads one header without building it,
from the headers the transport has already decoded (``transports.rules.headers_of``: lower-case names,
repeated ones joined with ``,``, as ``META`` joins them).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest

__all__ = ["LazyASGIRequest", "MetaView", "client_address", "header_value", "meta_view"]


class LazyASGIRequest(ASGIRequest):
    """Django's ``ASGIRequest`` for ``scope`` and ``body_file``, built the first time one of the fields Django
    sets in ``__init__`` (``META``, ``path``, ``method``, ``content_type``…) is read. Attributes set on it
    before then (``user``, ``auth``, ``session``) are kept. ``headers``: the scope's headers as the transport
    decoded them, read by :func:`header_value` until then."""

    def __init__(self, scope: dict[str, Any], body_file: Any, headers: Mapping[str, str]) -> None:
        self.scope = scope
        self._unbuilt_body: Any = body_file
        self._headers = headers

    def _build(self) -> None:
        body = self.__dict__.pop("_unbuilt_body", None)
        if body is not None:
            ASGIRequest.__init__(self, self.scope, body)

    def __getattr__(self, name: str) -> Any:
        # Called only for an attribute not found: one of Django's fields, before the request is built.
        if "_unbuilt_body" in self.__dict__ and not name.startswith("__"):
            self._build()
            return getattr(self, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def encoding(self) -> str | None:
        """As ``HttpRequest.encoding`` (a class attribute until the content type sets it)."""
        self._build()
        value: str | None = self._encoding
        return value

    @encoding.setter
    def encoding(self, value: str) -> None:
        self._build()
        HttpRequest.encoding.fset(self, value)  # type: ignore[attr-defined]


def _unbuilt(request: HttpRequest) -> LazyASGIRequest | None:
    """``request`` when it is a :class:`LazyASGIRequest` not built yet (``None`` for any other request)."""
    return request if "_unbuilt_body" in request.__dict__ else None  # type: ignore[return-value]


def header_value(request: HttpRequest, name: str) -> str | None:
    """The request's header ``name`` (lower case) as Django's ``META`` has it (repeated ones joined with
    ``,``), or ``None``; read from the ASGI scope while a :class:`LazyASGIRequest` is not built."""
    if "_" in name:  # never one: Django drops such headers (against spoofing ``-`` with ``_``)
        return None
    lazy = _unbuilt(request)
    if lazy is not None:
        return lazy._headers.get(name)
    key = name.upper().replace("-", "_")
    found = request.META.get(key if key in ("CONTENT_TYPE", "CONTENT_LENGTH") else f"HTTP_{key}")
    return None if found is None else str(found)


def client_address(request: HttpRequest | None) -> str:
    """The caller's address as the server saw it (``REMOTE_ADDR``: the ASGI scope's ``client``), or ``""``."""
    if request is None:
        return ""
    lazy = _unbuilt(request)
    if lazy is None:
        return str(request.META.get("REMOTE_ADDR") or "")
    client = lazy.scope.get("client")
    return str(client[0]) if client else ""


_ABSENT = object()


class MetaView(Mapping[str, Any]):
    """A request's ``META`` as a mapping read on demand: an ``HTTP_*`` key of a :class:`LazyASGIRequest` not
    built yet is read from its ASGI scope (:func:`header_value`); anything else reads ``META`` itself."""

    def __init__(self, request: HttpRequest) -> None:
        self._request = request

    def __getitem__(self, key: str) -> Any:
        value = self.get(key, _ABSENT)
        if value is _ABSENT:
            raise KeyError(key)
        return value

    def get(self, key: str, default: Any = None) -> Any:
        """``META[key]``, or ``default`` (without raising and catching a ``KeyError``, as ``Mapping.get``
        would: a request's span looks for a ``traceparent`` header most requests do not have)."""
        if key.startswith("HTTP_") and _unbuilt(self._request) is not None:
            value = header_value(self._request, key[5:].lower().replace("_", "-"))
            return default if value is None else value
        return self._request.META.get(key, default)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key, _ABSENT) is not _ABSENT

    def __iter__(self) -> Iterator[str]:
        return iter(self._request.META)

    def __len__(self) -> int:
        return len(self._request.META)

    def __bool__(self) -> bool:
        return True  # (every request's META has its method and path)


def meta_view(request: Any) -> MetaView | None:
    """:class:`MetaView` of ``request``; ``None`` without one (stdio) or for an object with no ``META``."""
    if isinstance(request, LazyASGIRequest) or hasattr(request, "META"):
        return MetaView(request)
    return None
