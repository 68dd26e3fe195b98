"""Opaque cursors of the list methods (``paginate``): pages, the last page without a cursor, and -32602 for
every cursor the server did not hand out."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from mcp_server.protocol.pagination import InvalidCursor, decode_cursor, encode_cursor, paginate
from mcp_server.wire.errors import INVALID_PARAMS, JSONRPCError

ITEMS = ["a", "b", "c", "d", "e"]


def cursor_of(value: Any) -> str:
    """A cursor made the way the server makes them, around ``value``."""
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode()


def test_pages_through_every_item_once_and_the_last_page_has_no_cursor() -> None:
    seen: list[str] = []
    pages = 0
    cursor: str | None = None
    while True:
        page, cursor = paginate(ITEMS, cursor, 2)
        seen += page
        pages += 1
        if cursor is None:
            break
    assert seen == ITEMS
    assert pages == 3


def test_the_first_page_and_its_cursor() -> None:
    page, cursor = paginate(ITEMS, None, 2)
    assert page == ["a", "b"]
    assert cursor == cursor_of({"o": 2})


def test_a_page_that_ends_at_the_last_item_has_no_cursor() -> None:
    assert paginate(ITEMS, None, 5) == (ITEMS, None)
    assert paginate(ITEMS, cursor_of({"o": 3}), 2) == (["d", "e"], None)


def test_a_page_that_stops_one_short_of_the_end_has_a_cursor() -> None:
    page, cursor = paginate(ITEMS, None, 4)
    assert page == ["a", "b", "c", "d"]
    assert cursor is not None
    assert paginate(ITEMS, cursor, 4) == (["e"], None)


def test_a_cursor_at_offset_zero_is_the_first_page() -> None:
    assert paginate(ITEMS, cursor_of({"o": 0}), 2) == (["a", "b"], cursor_of({"o": 2}))


def test_a_cursor_at_the_end_is_an_empty_last_page() -> None:
    assert paginate(ITEMS, cursor_of({"o": len(ITEMS)}), 2) == ([], None)


def test_an_empty_list_is_one_empty_page() -> None:
    assert paginate([], None, 3) == ([], None)


@pytest.mark.parametrize(
    "cursor",
    [
        pytest.param("!!not base64!!", id="not-base64"),
        pytest.param(base64.urlsafe_b64encode(b"not json").decode(), id="not-json"),
        pytest.param(cursor_of({"offset": 1}), id="no-o"),
        pytest.param(cursor_of([1]), id="a-list"),
        pytest.param(cursor_of({"o": "1"}), id="a-string-offset"),
        pytest.param(cursor_of({"o": 1.0}), id="a-float-offset"),
        pytest.param(cursor_of({"o": -1}), id="negative"),
        pytest.param(cursor_of({"o": len(ITEMS) + 1}), id="past-the-end"),
        pytest.param(12, id="not-a-string"),
        pytest.param(cursor_of({"o": 1, "pad": "x" * 100}), id="longer-than-any-cursor-given"),
        pytest.param(base64.urlsafe_b64encode(b"[" * 100_000).decode(), id="deeply-nested"),
    ],
)
def test_a_cursor_the_server_did_not_give_is_invalid_params(cursor: Any) -> None:
    with pytest.raises(JSONRPCError) as raised:
        paginate(ITEMS, cursor, 2)
    assert (raised.value.code, raised.value.message) == (INVALID_PARAMS, "Invalid cursor")


def test_the_codec_round_trips_and_takes_a_cursor_without_its_padding() -> None:
    for offset in (0, 2, 5, 100, 12345):
        assert decode_cursor(encode_cursor(offset)) == offset
        assert decode_cursor(encode_cursor(offset).rstrip("=")) == offset  # as expose_model wrote them
    assert encode_cursor(2) == cursor_of({"o": 2})
    with pytest.raises(InvalidCursor):
        decode_cursor(cursor_of({"o": -1}))
