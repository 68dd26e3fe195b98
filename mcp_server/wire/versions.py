"""Protocol revisions this server speaks and how one is chosen."""

from __future__ import annotations

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

__all__ = [
    "BATCH_VERSIONS",
    "DEFAULT_HEADER_VERSION",
    "LATEST_VERSION",
    "SESSIONLESS_VERSIONS",
    "SUPPORTED_VERSIONS",
    "V2026_07_28",
    "is_sessionless_version",
    "negotiate",
]

SUPPORTED_VERSIONS: tuple[str, ...] = tuple(HANDSHAKE_PROTOCOL_VERSIONS)
"""Handshake-era revisions, oldest first."""

LATEST_VERSION = SUPPORTED_VERSIONS[-1]

V2026_07_28 = "2026-07-28"
"""The sessionless revision: per-request ``_meta``, no sessions, no server-to-client requests."""

SESSIONLESS_VERSIONS: tuple[str, ...] = (V2026_07_28,)
"""Per-request (``_meta``) revisions this server serves, oldest first: the one list of them."""

DEFAULT_HEADER_VERSION = "2025-03-26"
"""Assumed when a request after ``initialize`` carries no ``MCP-Protocol-Version`` header."""

BATCH_VERSIONS = frozenset({"2025-03-26"})
"""Revisions whose Streamable HTTP transport accepts JSON-RPC batches."""


def is_sessionless_version(version: object) -> bool:
    """Whether a request at ``version`` speaks a sessionless revision (2026-07-28): the one test of it, which
    ``SessionState.sessionless`` and ``Context.sessionless`` ask."""
    return version in SESSIONLESS_VERSIONS


def negotiate(requested: object) -> str:
    """The client's revision when we support it, else our newest."""
    if isinstance(requested, str) and requested in SUPPORTED_VERSIONS:
        return requested
    return LATEST_VERSION
