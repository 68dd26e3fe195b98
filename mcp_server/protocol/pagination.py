"""Opaque cursors for list methods."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Any, TypeVar

from ..wire.errors import INVALID_PARAMS, JSONRPCError

__all__ = ["paginate"]

T = TypeVar("T")


def _encode(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode()


def _decode(cursor: Any) -> int:
    try:
        offset = json.loads(base64.urlsafe_b64decode(str(cursor).encode()))["o"]
    except (binascii.Error, ValueError, TypeError, KeyError) as exc:
        raise JSONRPCError(INVALID_PARAMS, "Invalid cursor") from exc
    if not isinstance(offset, int) or offset < 0:
        raise JSONRPCError(INVALID_PARAMS, "Invalid cursor")
    return offset


def paginate(items: Sequence[T], cursor: Any, page_size: int) -> tuple[list[T], str | None]:
    """One page of ``items`` from ``cursor`` and the cursor of the next page, if any."""
    offset = 0 if cursor is None else _decode(cursor)
    if offset > len(items):
        raise JSONRPCError(INVALID_PARAMS, "Invalid cursor")
    end = offset + page_size
    return list(items[offset:end]), (_encode(end) if end < len(items) else None)
