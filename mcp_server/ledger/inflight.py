"""Deprecated: ``mcp_server.ledger.inflight`` moved to ``mcp_server.runtime.inflight``.

This module warns when imported and gives the same objects by name, on first use: the ledger layer imports
nothing of the runtime above it.
"""

# ruff: noqa: F822 (the names of __all__ are given by __getattr__)
from __future__ import annotations

from mcp_server.core.moved import moved_up

__all__ = ["InFlight"]

__getattr__ = moved_up(__name__, "mcp_server.runtime.inflight", __all__)
