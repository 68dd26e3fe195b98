"""Header rules of the Streamable HTTP transport: host and origin allowlists, Accept, Content-Type."""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import split_domain_port, validate_host

from ..conf import LOCAL_HOSTS, allowed_hosts, mcp_settings

__all__ = [
    "HTTPProblem",
    "Headers",
    "accepts",
    "allowed_hosts",
    "check_origin_and_host",
    "is_json_content_type",
]

Headers = dict[str, str]


class HTTPProblem(Exception):
    """A request refused at the HTTP level, before any JSON-RPC is read."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: int = -32600,
        headers: list[tuple[bytes, bytes]] | None = None,
        request_id: str | int | None = None,
        data: Any = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.headers = list(headers or [])
        self.request_id = request_id
        """The id of the refused request, when it could be read (its error answer carries it)."""
        self.data = data
        """The JSON-RPC error's ``data``, if any."""


def headers_of(raw: Iterable[tuple[bytes, bytes]]) -> Headers:
    """ASGI headers as a dict of lower-case names (repeated headers joined with commas)."""
    out: Headers = {}
    for name, value in raw:
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        out[key] = f"{out[key]},{text}" if key in out else text
    return out


def _origin_allowed(origin: str, host: str) -> bool:
    allowed = list(mcp_settings.ALLOWED_ORIGINS)
    if "*" in allowed or origin in allowed:
        return True
    parts = urlsplit(origin)
    if not parts.scheme or not parts.hostname:
        return False
    origin_host = parts.netloc.lower()
    if origin_host == host.lower():
        return True
    return settings.DEBUG and validate_host(parts.hostname.lower(), LOCAL_HOSTS)


@lru_cache(maxsize=256)
def _host_allowed(host: str, hosts: tuple[str, ...]) -> bool:
    domain, _port = split_domain_port(host)
    return bool(domain) and validate_host(domain, hosts)


def check_origin_and_host(headers: Headers) -> None:
    """403 when ``Host`` is not allowed, or ``Origin`` is neither same-origin nor allowlisted.

    Each must come once with one value: :func:`headers_of` joins repeated headers with commas, and a comma
    belongs in neither a host nor a serialized origin, so two ``Origin`` headers (or one listing two
    origins) are refused whatever they say, under ``DEBUG`` too.
    """
    for name in ("host", "origin"):
        if "," in headers.get(name, ""):
            label = name.capitalize()
            raise HTTPProblem(
                403, f"{label} must be one value: repeated or comma-joined {label} headers are refused"
            )
    host = headers.get("host", "")
    if not _host_allowed(host, tuple(allowed_hosts())):
        raise HTTPProblem(403, f"Host {host!r} is not allowed")
    origin = headers.get("origin")
    if origin is not None and origin != "null" and not _origin_allowed(origin, host):
        raise HTTPProblem(403, f"Origin {origin!r} is not allowed")
    if origin == "null" and "null" not in mcp_settings.ALLOWED_ORIGINS:
        raise HTTPProblem(403, "Origin 'null' is not allowed")


def _media_types(accept: str) -> frozenset[str]:
    return frozenset(part.split(";")[0].strip().lower() for part in accept.split(",") if part.strip())


@lru_cache(maxsize=64)
def _accepts(accept: str, wanted: tuple[str, ...]) -> bool:
    types = _media_types(accept)
    for media in wanted:
        major = media.split("/")[0]
        if not types & {media, f"{major}/*", "*/*"}:
            return False
    return True


def accepts(headers: Headers, *wanted: str) -> bool:
    """Whether ``Accept`` lists every media type in ``wanted`` (wildcards count; each ``Accept`` value is
    read once: clients send the same few)."""
    accept = headers.get("accept", "")
    if len(accept) > 512:  # not worth keeping
        return _accepts.__wrapped__(accept, wanted)
    return _accepts(accept, wanted)


def is_json_content_type(headers: Headers) -> bool:
    """Whether ``Content-Type`` is ``application/json`` (parameters such as charset allowed)."""
    return headers.get("content-type", "").split(";")[0].strip().lower() == "application/json"
