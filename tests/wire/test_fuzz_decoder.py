"""Property test of the wire layer (no server): whatever bytes arrive, decoding and parsing end in a message
or a JSON-RPC error, never another exception; a request is never mistaken for a notification; and whatever
the server answers is encoded into JSON a strict client reads, for the same id when it can be sent back."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_server.wire.errors import INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR, JSONRPCError
from mcp_server.wire.jsonrpc import (
    JSONRPCRequest,
    decode_body,
    echoable_id,
    encode_reply,
    error_response,
    parse_message,
    refusal,
    result_response,
)
from tests.support.hostile import (
    acceptable_id,
    bodies,
    hostile_ids,
    hostile_text,
    json_values,
    may_fail_to_parse,
    render,
    strict_json,
)


def attempt(call: Callable[[Any], Any], value: Any) -> tuple[Any, JSONRPCError | None]:
    """``(result, None)``, or ``(None, the JSON-RPC error it raised)``; any other exception propagates."""
    try:
        return call(value), None
    except JSONRPCError as exc:
        return None, exc


FUZZ = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


@FUZZ
@given(data=st.binary(max_size=256))
def test_any_bytes_decode_or_are_a_parse_error(data: bytes) -> None:
    _, error = attempt(decode_body, data)
    assert error is None or error.code == PARSE_ERROR


@FUZZ
@given(body=bodies)
def test_every_member_parses_or_is_refused_and_the_refusal_can_be_sent(body: Any) -> None:
    decoded, error = attempt(decode_body, render(body))
    if error is not None:
        assert error.code == PARSE_ERROR
        assert may_fail_to_parse(body)
        return
    for item in decoded if isinstance(decoded, list) else [decoded]:
        message, refused = attempt(parse_message, item)
        if refused is not None:
            assert refused.code == INVALID_REQUEST
            sent = strict_json(encode_reply(refusal(item, refused)).data)
            assert sent["error"]["code"] == INVALID_REQUEST
            own = item.get("id") if isinstance(item, dict) else None
            assert sent["id"] == echoable_id(own)
            continue
        if isinstance(item, dict) and "method" in item and "id" in item:
            assert isinstance(message, JSONRPCRequest), (item, message)  # never taken for a notification
        if isinstance(message, JSONRPCRequest):
            assert acceptable_id(message.id)
            assert message.id == item["id"]
            assert type(message.id) is type(item["id"])


@FUZZ
@given(request_id=hostile_ids, result=json_values)
def test_any_result_is_sent_as_json_for_its_id(request_id: Any, result: Any) -> None:
    reply = encode_reply(result_response(request_id, {"value": result}))
    sent = strict_json(reply.data)
    assert sent == json.loads(json.dumps(reply.message))  # the bytes carry the message recorded
    if echoable_id(request_id) is not None and not isinstance(request_id, float):
        assert sent["id"] == request_id
    assert "result" in sent or sent["error"]["code"] == INTERNAL_ERROR


@FUZZ
@given(request_id=hostile_ids, code=st.integers(-33000, -32000), message=hostile_text, data=json_values)
def test_any_error_is_sent_as_json_keeping_its_code(
    request_id: Any, code: int, message: str, data: Any
) -> None:
    sent = strict_json(encode_reply(error_response(request_id, JSONRPCError(code, message, data))).data)
    if echoable_id(request_id) is not None:
        assert sent["id"] == request_id
        assert sent["error"]["code"] == code
