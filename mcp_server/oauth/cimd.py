"""Client ID Metadata Documents (CIMD): a client's ``client_id`` is an https URL the site fetches.

django-oauth-toolkit resolves them (``oauth2_provider.cimd``: fetch on first sight, an Application row
cached between ``CIMD_METADATA_MIN_AGE_SECONDS`` and ``CIMD_METADATA_MAX_AGE_SECONDS``, a failure backoff,
an in-flight cap). This module adds what an MCP site needs around it:

- :class:`MetadataFetcher`: DOT's SSRF-hardened fetcher (https only, public addresses only, no redirects,
  ``CIMD_FETCH_TIMEOUT_SECONDS``, ``CIMD_MAX_DOCUMENT_SIZE``), except for the hosts of
  ``MCP_SERVER["OAUTH_CIMD_PRIVATE_HOSTS"]``, which may resolve to private or loopback addresses; then the
  document's ``client_id`` must be its URL and its ``redirect_uris`` pass the registration rules.
- :class:`HostPermission`: the optional allow-list of client-id hosts, ``MCP_SERVER["OAUTH_CIMD_HOSTS"]``.
- :func:`refusal`: why a CIMD ``client_id`` was refused, for the authorize step's error page (DOT itself
  treats every failure as an unknown client, without saying why).
"""

from __future__ import annotations

import hashlib
import ssl
import time
from typing import Any
from urllib.parse import urlsplit

import urllib3
from django.core.cache import cache
from django.http.request import validate_host
from oauth2_provider import cimd as dot_cimd
from oauth2_provider.settings import oauth2_settings

from .redirects import redirect_problem

__all__ = ["HostPermission", "MetadataFetcher", "is_cimd_client_id", "refusal"]

_REASON_PREFIX = "mcp_server:oauth:cimd:why:"
_CHUNK = 4096


def is_cimd_client_id(client_id: str) -> bool:
    """Whether ``client_id`` is a CIMD URL and CIMD is on (``OAUTH2_PROVIDER["CIMD_ENABLED"]``)."""
    return bool(oauth2_settings.CIMD_ENABLED) and dot_cimd.is_cimd_client_id(client_id)


def _host(client_id: str) -> str:
    try:
        return urlsplit(client_id).hostname or ""
    except ValueError:
        return ""


def _reason_key(client_id: str) -> str:
    return _REASON_PREFIX + hashlib.sha256(client_id.encode("utf-8", "surrogatepass")).hexdigest()


def _allowed_host(client_id: str) -> bool:
    from ..conf import mcp_settings

    hosts = mcp_settings.OAUTH_CIMD_HOSTS
    if hosts is None:
        return True
    host = _host(client_id)
    return bool(host) and validate_host(host, list(hosts))


def _private_ok(client_id: str) -> bool:
    from ..conf import mcp_settings

    host = _host(client_id)
    return bool(host) and validate_host(host, list(mcp_settings.OAUTH_CIMD_PRIVATE_HOSTS or []))


class HostPermission:
    """DOT's CIMD permission class: the client-id host must be in ``OAUTH_CIMD_HOSTS`` (``None``: any)."""

    def has_permission(self, request: Any, client_id: str) -> bool:
        return _allowed_host(client_id)


def _problem(client_id: str, metadata: dict[str, Any]) -> str | None:
    """What the site refuses in a fetched document beyond DOT's own rules, or ``None``."""
    if metadata.get("client_id") != client_id:
        return "its client_id does not match the URL it was fetched from"
    for uri in metadata.get("redirect_uris") or []:
        problem = redirect_problem(uri)
        if problem:
            return problem
    name = metadata.get("client_name", "")
    if isinstance(name, str) and len(name) > 255:
        return "its client_name is longer than 255 characters"
    try:
        dot_cimd._build_application_kwargs(metadata)  # DOT's rules, for their message
    except dot_cimd.CIMDError as exc:
        return str(exc)
    return None


class MetadataFetcher(dot_cimd.SafeMetadataFetcher):  # type: ignore[misc]
    """``CIMD_METADATA_FETCHER``: DOT's fetcher, private addresses for ``OAUTH_CIMD_PRIVATE_HOSTS``.

    A refusal is remembered (as long as DOT's failure backoff) for :func:`refusal`.
    """

    def fetch(self, client_id: str) -> tuple[dict[str, Any], int]:
        try:
            if _private_ok(client_id):
                metadata, max_age = self._fetch_trusted(client_id)
            else:
                metadata, max_age = super().fetch(client_id)
            problem = _problem(client_id, metadata)
            if problem:
                raise dot_cimd.CIMDError(problem)
        except dot_cimd.CIMDError as exc:
            cache.set(_reason_key(client_id), str(exc), oauth2_settings.CIMD_FAILURE_BACKOFF_SECONDS)
            raise
        cache.delete(_reason_key(client_id))
        return metadata, max_age

    def _fetch_trusted(self, client_id: str) -> tuple[dict[str, Any], int]:
        """Fetch from a host the site trusts to be private: https, no redirects, the same limits."""
        parsed = dot_cimd._validate_client_id_url(client_id)
        timeout = float(oauth2_settings.CIMD_FETCH_TIMEOUT_SECONDS)
        deadline = time.monotonic() + timeout
        pool = urllib3.HTTPSConnectionPool(
            parsed.hostname,
            port=parsed.port or 443,
            timeout=urllib3.Timeout(connect=timeout, read=timeout),
            retries=False,
            maxsize=1,
            ssl_context=ssl.create_default_context(),
        )
        path = parsed.path + (f"?{parsed.query}" if parsed.query else "")
        try:
            response = pool.urlopen(
                "GET",
                path,
                headers={"Accept": "application/json, application/*+json"},
                redirect=False,
                preload_content=False,
            )
            try:
                return self._read_document(_Bounded(response, deadline))  # type: ignore[no-any-return]
            finally:
                response.release_conn()
        except urllib3.exceptions.HTTPError as exc:
            raise dot_cimd.CIMDError(f"could not fetch client_id document: {exc}") from exc
        finally:
            pool.close()


class _Bounded:
    """A response whose ``read`` stops at the fetch's deadline, however slowly the body drips."""

    def __init__(self, response: Any, deadline: float) -> None:
        self.response = response
        self.deadline = deadline
        self.status = response.status
        self.headers = response.headers

    def read(self, limit: int) -> bytes:
        body = b""
        while len(body) < limit:
            if time.monotonic() > self.deadline:
                raise dot_cimd.CIMDError("client_id document took longer than the fetch timeout")
            chunk = self.response.read1(min(_CHUNK, limit - len(body)))  # what one recv brings
            if not chunk:
                break
            body += chunk
        return body


def refusal(client_id: str) -> str:
    """Why the CIMD ``client_id`` could not be used, in words for the authorize step's error."""
    host = _host(client_id) or client_id
    if not _allowed_host(client_id):
        return f"Client ID Metadata Documents from {host} are not accepted by this site"
    reason = cache.get(_reason_key(client_id))
    if reason:
        return f"The client's metadata document at {client_id} was refused: {reason}"
    return (
        f"The client's metadata document at {client_id} could not be fetched now "
        "(a recent failure, or too many fetches at once); try again later"
    )
