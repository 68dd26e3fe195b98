"""What the ``mcp-types`` schema itself says of a request: the reference the fast answers are held to."""

from __future__ import annotations

from typing import Any

from mcp_types.methods import validate_client_request

__all__ = ["schema_accepts_call"]


def schema_accepts_call(version: str, params: dict[str, Any]) -> bool:
    """Whether revision ``version``'s schema accepts ``tools/call`` with ``params`` (an unknown revision:
    no)."""
    try:
        validate_client_request("tools/call", version, params)
    except (KeyError, ValueError):  # (pydantic's ValidationError is a ValueError)
        return False
    return True
