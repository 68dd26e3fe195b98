"""I10 at the wire: what a client can send is decoded or refused with a JSON-RPC error, and what the server
sends is always JSON that decodes as UTF-8 (an unencodable response becomes an error for the same id)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcp_server.wire.errors import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, JSONRPCError
from mcp_server.wire.jsonrpc import (
    MAX_DEPTH,
    MAX_INT_ID,
    MIN_INT_ID,
    JSONRPCNotification,
    JSONRPCRequest,
    decode_body,
    dumps,
    encode_message,
    encode_reply,
    error_response,
    lone_surrogate_at,
    parse_message,
    refusal,
    result_response,
)

SURROGATE = "\ud800"


def strict_json(data: bytes) -> Any:
    """What a strict client reads: UTF-8 (no encoded surrogates) holding JSON without NaN or Infinity."""

    def refuse(name: str) -> Any:
        raise AssertionError(f"{name} is not JSON")

    return json.loads(data.decode("utf-8"), parse_constant=refuse)


def request(request_id: Any, method: str = "ping") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method}


# -- decoding ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 1_000, 100_000])
def test_deep_nesting_is_a_parse_error(depth: int) -> None:
    with pytest.raises(JSONRPCError) as caught:
        decode_body(b"[" * depth + b"]" * depth)
    assert caught.value.code == PARSE_ERROR
    assert "nested too deeply" in caught.value.message


def test_nesting_up_to_the_limit_is_json() -> None:
    assert decode_body(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH) is not None
    wide = b"[" + b",".join([b"[1]"] * (MAX_DEPTH * 4)) + b"]"  # many brackets, shallow: accepted
    assert len(decode_body(wide)) == MAX_DEPTH * 4


@pytest.mark.parametrize("constant", [b"NaN", b"Infinity", b"-Infinity"])
def test_nan_and_infinity_are_not_json(constant: bytes) -> None:
    with pytest.raises(JSONRPCError) as caught:
        decode_body(b'{"jsonrpc": "2.0", "id": 1, "method": "x", "params": {"n": ' + constant + b"}}")
    assert caught.value.code == PARSE_ERROR


@pytest.mark.parametrize("body", [b'"\xed\xa0\x80"', b'"\xff"', b'{"a": "\xc3"}'])
def test_invalid_utf8_is_a_parse_error(body: bytes) -> None:
    """Bytes that are not UTF-8, among them an encoded surrogate (which Python's own json lets through)."""
    with pytest.raises(JSONRPCError) as caught:
        decode_body(body)
    assert caught.value.code == PARSE_ERROR


def test_an_escaped_lone_surrogate_is_valid_json() -> None:
    assert decode_body(b'"\\ud800"') == SURROGATE


# -- request ids and methods -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ({"text": "fine", "n": 1, "list": ["é", "🎉"], "nul": "a\x00b"}, None),
        ("\ud800", ()),
        ({"text": "a\udfffb"}, ("text",)),
        ({"a": [1, {"b": ["ok", "\ud83d"]}]}, ("a", 1, "b", 1)),
        ({"ok": {"\ud800": 1}}, ("ok", "\ud800")),
        ([[[[["\udc00"]]]]], (0, 0, 0, 0, 0)),
    ],
)
def test_a_lone_surrogate_is_found_where_it_is(value: Any, where: tuple[str | int, ...] | None) -> None:
    assert lone_surrogate_at(value) == where


@pytest.mark.parametrize(
    "request_id",
    [1.5, 1.0, True, False, {"a": 1}, [1], None],
    ids=["float", "integral-float", "true", "false", "object", "array", "null"],
)
def test_a_wrong_typed_id_is_refused_not_taken_for_a_notification(request_id: Any) -> None:
    with pytest.raises(JSONRPCError) as caught:
        parse_message(request(request_id))
    assert caught.value.code == INVALID_REQUEST
    assert refusal(request(request_id), caught.value)["id"] is None


@pytest.mark.parametrize(
    ("request_id", "echoed"),
    [
        (MAX_INT_ID + 1, True),
        (MIN_INT_ID - 1, True),
        (10**300, True),
        ("a\x00b", True),
        ("a" + SURROGATE, False),
    ],
    ids=["above-64-bits", "below-64-bits", "huge", "nul", "surrogate"],
)
def test_an_id_the_ledger_cannot_hold_is_refused(request_id: Any, echoed: bool) -> None:
    with pytest.raises(JSONRPCError) as caught:
        parse_message(request(request_id))
    assert caught.value.code == INVALID_REQUEST
    answer = refusal(request(request_id), caught.value)
    assert answer["id"] == (request_id if echoed else None)
    assert strict_json(dumps(answer))["error"]["code"] == INVALID_REQUEST


@pytest.mark.parametrize(
    "request_id", ["x" * 198, "x" * 199, "x" * 100_000, MAX_INT_ID, MIN_INT_ID, "", "日本語 ✓", 0]
)
def test_ids_at_the_limits_are_accepted(request_id: Any) -> None:
    message = parse_message(request(request_id))
    assert isinstance(message, JSONRPCRequest)
    assert message.id == request_id


@pytest.mark.parametrize(
    "method",
    ["tools/\x00call", "tools/" + SURROGATE],
    ids=["nul", "surrogate"],
)
def test_a_method_the_server_cannot_accept_is_refused_with_the_id(method: str) -> None:
    with pytest.raises(JSONRPCError) as caught:
        parse_message(request(7, method))
    assert caught.value.code == INVALID_REQUEST
    assert refusal(request(7, method), caught.value)["id"] == 7


def test_a_notification_with_an_odd_method_is_still_a_notification() -> None:
    """Nothing answers or records a notification: an unknown method is ignored, as any unknown one is."""
    message = parse_message({"jsonrpc": "2.0", "method": "x\x00" + SURROGATE})
    assert isinstance(message, JSONRPCNotification)


# -- encoding ------------------------------------------------------------------------------------------------


def test_a_result_json_cannot_carry_becomes_internal_error_for_its_id() -> None:
    reply = encode_reply(result_response(5, {"content": [{"type": "text", "text": "a" + SURROGATE}]}))
    sent = strict_json(reply.data)
    assert sent == reply.message
    assert sent["id"] == 5
    assert sent["error"]["code"] == INTERNAL_ERROR
    assert "lone UTF-16 surrogate" in sent["error"]["message"]


@pytest.mark.parametrize(
    ("value", "reason"),
    [(float("nan"), "Out of range float"), (float("inf"), "Out of range float"), ({1, 2}, "set")],
    ids=["nan", "infinity", "set"],
)
def test_values_that_are_not_json_become_internal_error(value: Any, reason: str) -> None:
    reply = encode_reply(result_response("r", {"value": value}))
    sent = strict_json(reply.data)
    assert sent["id"] == "r"
    assert sent["error"]["code"] == INTERNAL_ERROR
    assert reason in sent["error"]["message"]


def test_a_result_nested_past_the_stack_becomes_internal_error() -> None:
    deep: Any = "bottom"
    for _ in range(100_000):
        deep = [deep]
    sent = strict_json(encode_reply(result_response(1, {"deep": deep})).data)
    assert sent["error"]["code"] == INTERNAL_ERROR
    assert "nested too deeply" in sent["error"]["message"]


def test_an_error_json_cannot_carry_keeps_its_code() -> None:
    error = JSONRPCError(INVALID_PARAMS, "Unknown tool: a" + SURROGATE, {"name": SURROGATE})
    sent = strict_json(encode_reply(error_response(3, error)).data)
    assert sent == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {"code": INVALID_PARAMS, "message": "Unknown tool: a\ufffd"},
    }


def test_an_id_json_cannot_carry_is_answered_with_null() -> None:
    sent = strict_json(encode_reply(result_response(SURROGATE, {})).data)
    assert sent["id"] is None
    assert sent["error"]["code"] == INTERNAL_ERROR


def test_a_response_json_can_carry_is_sent_as_it_is() -> None:
    response = result_response("é", {"text": "日本語\x00✓"})
    reply = encode_reply(response)
    assert reply.message is response
    assert reply.data == json.dumps(response, separators=(",", ":"), ensure_ascii=False).encode()


def test_a_notification_json_cannot_carry_raises_for_its_sender() -> None:
    with pytest.raises(JSONRPCError) as caught:
        encode_message({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": SURROGATE}})
    assert caught.value.code == INTERNAL_ERROR
    assert "notifications/message" in caught.value.message
