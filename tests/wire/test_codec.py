"""The wire's JSON codec: orjson where it reads and writes exactly what the standard library would, the
standard library everywhere else. Whatever the bytes or the value, :func:`decode_body` and :func:`dumps`
agree with the standard library's reading and writing: the same values (types included), the same errors."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_server.wire import jsonrpc
from mcp_server.wire.errors import JSONRPCError
from mcp_server.wire.jsonrpc import UNENCODABLE, decode_body, dumps
from tests.support.hostile import bodies, json_values, render

FUZZ = settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


def typed(value: Any) -> Any:
    """``value`` with each number tagged by its type (``1``, ``1.0`` and ``True`` compare equal in Python)."""
    if isinstance(value, dict):
        return {key: typed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [typed(item) for item in value]
    if isinstance(value, float) and math.isnan(value):
        return ("nan",)
    return (type(value).__name__, value)


def read(call: Any, body: bytes) -> tuple[str, Any]:
    try:
        return "value", typed(call(body))
    except JSONRPCError as exc:
        return "error", (exc.code, exc.message)


def standard_library_reading(body: bytes) -> tuple[str, Any]:
    """What the body decodes to through the standard library alone (the codec before orjson)."""

    def std(data: bytes) -> Any:
        value = jsonrpc._std_decode(data)
        if data.count(b"[") + data.count(b"{") > jsonrpc.MAX_DEPTH and jsonrpc._deeper_than(
            value, jsonrpc.MAX_DEPTH
        ):
            raise JSONRPCError(-32700, "Parse error: JSON nested too deeply")
        return value

    return read(std, body)


def written(call: Any, value: Any) -> tuple[str, Any]:
    try:
        return "json", typed(json.loads(call(value)))
    except UNENCODABLE as exc:
        return "refused", type(exc)


EDGE_BODIES = [
    b'{"a":123456789012345678901234567890}',  # past 64 bits: an int, never a float
    b'{"a":-9223372036854775809}',
    b'{"a":18446744073709551616}',
    b'{"a":9223372036854775807,"b":-9223372036854775808}',
    b'{"a":1e400}',  # an infinity the standard library reads
    b'{"a":NaN}',
    b'{"a":Infinity}',
    b'{"a":"\\ud800"}',  # a lone surrogate, escaped
    b'\xef\xbb\xbf{"a":1}',  # UTF-8 with its byte order mark
    '{"a":"\u00e9"}'.encode("utf-16"),
    b'{"a":"\xff"}',  # not UTF-8
    b'{"a":"\x00"}',  # a raw control character
    b'{"a":"\\u0000"}',
    b'{"a":1,"a":2}',
    b'{"a":-0,"b":1.0,"c":1E2,"d":0.1}',
    b" \n{}\t ",
    b"[" * 300 + b"]" * 300,
    b"[" * 1100 + b"]" * 1100,
    b"",
    b"01",
    b'{"a":1,}',
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}',
]


@pytest.mark.parametrize("body", EDGE_BODIES)
def test_edge_bodies_read_as_the_standard_library_reads_them(body: bytes) -> None:
    assert read(decode_body, body) == standard_library_reading(body)


def test_an_integer_past_64_bits_stays_an_integer() -> None:
    assert decode_body(b'{"id":123456789012345678901234567890}') == {"id": 123456789012345678901234567890}
    assert isinstance(decode_body(b'{"id":-9223372036854775809}')["id"], int)


@FUZZ
@given(data=st.binary(max_size=256))
def test_any_bytes_read_as_the_standard_library_reads_them(data: bytes) -> None:
    assert read(decode_body, data) == standard_library_reading(data)


@FUZZ
@given(body=bodies)
def test_any_body_reads_as_the_standard_library_reads_it(body: Any) -> None:
    data = render(body)
    assert read(decode_body, data) == standard_library_reading(data)


class Text(str):
    pass


EDGE_VALUES: list[Any] = [
    float("nan"),
    {"a": float("inf")},
    [float("-inf")],
    {"a": "\ud800"},
    {1: "int key", None: "null key", 1.5: "float key", False: "bool key"},
    2**70,
    -(2**63) - 1,
    {"a": None, "b": [None]},
    Text("a str subclass"),
    {"when": __import__("datetime").datetime(2026, 1, 1)},
    {"id": __import__("uuid").UUID(int=1), "null": None},
    {"id": __import__("uuid").UUID(int=1)},
    {"member": __import__("enum").Enum("Colour", "RED").RED, "null": None},
    {"member": __import__("enum").Enum("Colour", "RED").RED},
    {"member": __import__("enum").IntEnum("Level", "LOW").LOW},
    {1, 2},
    (1, "tuple"),
    {"deep": [[]] * 3},
    1e22,
    5e-324,
    -0.0,
    "\u2028 and \x7f and \x1f",
]


@pytest.mark.parametrize("value", EDGE_VALUES, ids=repr)
def test_edge_values_are_written_as_the_standard_library_writes_them(value: Any) -> None:
    assert written(dumps, value) == written(jsonrpc._std_dumps, value)


def test_nesting_past_orjson_limit_is_written_by_the_standard_library() -> None:
    value: Any = 1
    for _ in range(300):
        value = [value]
    assert written(dumps, value) == written(jsonrpc._std_dumps, value)


@FUZZ
@given(value=json_values)
def test_any_value_is_written_as_the_standard_library_writes_it(value: Any) -> None:
    assert written(dumps, value) == written(jsonrpc._std_dumps, value)


@FUZZ
@given(
    value=st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=20,
    )
)
def test_any_python_value_is_written_as_the_standard_library_writes_it(value: Any) -> None:
    assert written(dumps, value) == written(jsonrpc._std_dumps, value)


def test_a_uuid_and_an_enum_member_are_written_as_their_text_and_value() -> None:
    colour = __import__("enum").Enum("Colour", {"RED": "red"})
    value = {"id": __import__("uuid").UUID(int=1), "colour": colour.RED}
    expected = {"id": "00000000-0000-0000-0000-000000000001", "colour": "red"}
    assert json.loads(dumps(value)) == expected
    assert json.loads(dumps({**value, "n": None})) == {**expected, "n": None}


def test_a_plain_reply_is_orjson_compact_utf8() -> None:
    message = {"jsonrpc": "2.0", "id": 1, "result": {"text": "é ✓", "n": [1, 2.5, True]}}
    assert dumps(message) == json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()
