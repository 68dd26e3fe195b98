"""Protocol revisions this server speaks and how one is chosen."""

from __future__ import annotations

from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

__all__ = [
    "BATCH_VERSIONS",
    "DEFAULT_HEADER_VERSION",
    "LATEST_VERSION",
    "MODERN_VERSIONS",
    "SUPPORTED_VERSIONS",
    "negotiate",
]

SUPPORTED_VERSIONS: tuple[str, ...] = tuple(HANDSHAKE_PROTOCOL_VERSIONS)
"""Handshake-era revisions, oldest first."""

LATEST_VERSION = SUPPORTED_VERSIONS[-1]

MODERN_VERSIONS: tuple[str, ...] = ("2026-07-28",)
"""Revisions of the modern era: per-request ``_meta``, no sessions, no server-to-client requests."""

DEFAULT_HEADER_VERSION = "2025-03-26"
"""Assumed when a request after ``initialize`` carries no ``MCP-Protocol-Version`` header."""

BATCH_VERSIONS = frozenset({"2025-03-26"})
"""Revisions whose Streamable HTTP transport accepts JSON-RPC batches."""


def negotiate(requested: object) -> str:
    """The client's revision when we support it, else our newest."""
    if isinstance(requested, str) and requested in SUPPORTED_VERSIONS:
        return requested
    return LATEST_VERSION
