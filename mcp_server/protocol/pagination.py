"""Opaque cursors for list methods, and the codec behind them (also that of ``expose_model``'s list tools).

A cursor is the URL-safe base64 of ``{"o": <offset>}``. ``decode_cursor`` also takes one whose ``=`` padding
was left out (as ``expose_model`` wrote them before it used this codec), so every cursor handed out stays
good.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Any, TypeVar

from ..wire.errors import INVALID_PARAMS, JSONRPCError

__all__ = ["InvalidCursor", "decode_cursor", "encode_cursor", "paginate"]

T = TypeVar("T")


class InvalidCursor(ValueError):
    """A cursor this server did not hand out; each caller answers it its own way."""


def encode_cursor(offset: int) -> str:
    """The cursor of the page that starts at ``offset``."""
    return base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode()


MAX_CURSOR_LENGTH = 100
"""Longer than any cursor :func:`encode_cursor` makes (about 30 characters): a longer one is refused unread,
so a client's cursor costs no decoding of megabytes, nor a parser's recursion."""


def decode_cursor(cursor: Any) -> int:
    """The offset ``cursor`` carries (a non-negative integer), else ``InvalidCursor``."""
    text = str(cursor)
    if len(text) > MAX_CURSOR_LENGTH:
        raise InvalidCursor(text[:MAX_CURSOR_LENGTH])
    try:
        offset = json.loads(base64.urlsafe_b64decode((text + "=" * (-len(text) % 4)).encode()))["o"]
    except (binascii.Error, ValueError, TypeError, KeyError) as exc:
        raise InvalidCursor(cursor) from exc
    if not isinstance(offset, int) or offset < 0:
        raise InvalidCursor(cursor)
    return offset


def paginate(items: Sequence[T], cursor: Any, page_size: int) -> tuple[list[T], str | None]:
    """One page of ``items`` from ``cursor`` and the cursor of the next page, if any."""
    try:
        offset = 0 if cursor is None else decode_cursor(cursor)
    except InvalidCursor as exc:
        raise JSONRPCError(INVALID_PARAMS, "Invalid cursor") from exc
    if offset > len(items):
        raise JSONRPCError(INVALID_PARAMS, "Invalid cursor")
    end = offset + page_size
    return list(items[offset:end]), (encode_cursor(end) if end < len(items) else None)
