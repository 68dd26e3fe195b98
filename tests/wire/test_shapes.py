"""The shapes recognised without pydantic (mcp_server.wire.shapes) are exactly what the models return
unchanged: each fast answer is held to the model's own."""

from __future__ import annotations

from typing import Any

import pytest
from mcp_types.jsonrpc import jsonrpc_message_adapter
from mcp_types.methods import serialize_server_result
from pydantic import ValidationError

from mcp_server.wire.errors import JSONRPCError
from mcp_server.wire.jsonrpc import parse_message
from mcp_server.wire.shapes import is_plain_request, is_plain_text_result, keeps_structured_content
from mcp_server.wire.versions import SUPPORTED_VERSIONS

PLAIN_RESULTS: list[dict[str, Any]] = [
    {"content": []},
    {"content": [{"type": "text", "text": "x"}]},
    {"content": [{"type": "text", "text": ""}, {"type": "text", "text": "é\u2028"}], "isError": False},
    {"content": [{"type": "text", "text": "failed"}], "isError": True},
]
NOT_PLAIN_RESULTS: list[dict[str, Any]] = [
    {},
    {"content": None},
    {"content": ({"type": "text", "text": "x"},)},
    {"content": [{"type": "text", "text": 1}]},
    {"content": [{"type": "text", "text": "x", "annotations": {"priority": 1}}]},
    {"content": [{"type": "image", "data": "", "mimeType": "image/png"}]},
    {"content": [{"type": "text"}]},
    {"content": [], "isError": 1},
    {"content": [], "structuredContent": {"a": 1}},
    {"content": [], "_meta": {"x": 1}},
    {"content": [["text"]]},
]


def _handshake_versions() -> list[str]:
    found = []
    for version in SUPPORTED_VERSIONS:
        try:
            serialize_server_result("tools/call", version, {"content": []})
        except KeyError:
            continue
        found.append(version)
    return found


@pytest.mark.parametrize("result", PLAIN_RESULTS)
@pytest.mark.parametrize("version", _handshake_versions())
def test_a_plain_text_result_is_what_every_revision_returns_unchanged(
    result: dict[str, Any], version: str
) -> None:
    assert is_plain_text_result(result)
    assert serialize_server_result("tools/call", version, result) == result


@pytest.mark.parametrize("result", NOT_PLAIN_RESULTS)
def test_anything_more_than_text_blocks_goes_through_the_schema(result: dict[str, Any]) -> None:
    assert not is_plain_text_result(result)


def test_keys_the_caller_vouches_for_are_allowed_and_no_others() -> None:
    result = {"content": [], "resultType": "complete"}
    assert not is_plain_text_result(result)
    assert is_plain_text_result(result, frozenset({"resultType"}))


REQUESTS: list[Any] = [
    {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {}}},
    {"jsonrpc": "2.0", "id": "a-1", "method": "ping"},
    {"jsonrpc": "2.0", "id": 0, "method": "x", "params": {}},
    {"jsonrpc": "2.0", "id": -(2**63), "method": "x"},
]
NEAR_MISSES: list[Any] = [
    {"jsonrpc": "2.0", "id": True, "method": "x"},
    {"jsonrpc": "2.0", "id": None, "method": "x"},
    {"jsonrpc": "2.0", "id": 1.0, "method": "x"},
    {"jsonrpc": "2.0", "id": 2**63, "method": "x"},
    {"jsonrpc": "2.0", "id": 1, "method": "x", "params": None},
    {"jsonrpc": "2.0", "id": 1, "method": "x", "params": [1]},
    {"jsonrpc": "2.0", "id": 1, "method": 5},
    {"jsonrpc": "2.0", "id": 1, "method": "x\x00"},
    {"jsonrpc": "2.0", "id": "\ud800", "method": "x"},
    {"jsonrpc": "2.0", "id": 1, "method": "x", "result": {}},
    {"jsonrpc": "1.0", "id": 1, "method": "x"},
    {"jsonrpc": "2.0", "id": 1, "method": "x", "extra": 1},
    {"id": 1, "method": "x"},
]


def _outcome(obj: Any) -> Any:
    try:
        return ("message", parse_message(obj).model_dump(exclude_unset=True))
    except JSONRPCError as exc:
        return ("refused", exc.code)


@pytest.mark.parametrize("obj", REQUESTS)
def test_a_plain_request_is_built_as_the_model_would_build_it(obj: dict[str, Any]) -> None:
    assert is_plain_request(obj)
    built = parse_message(obj)
    validated = jsonrpc_message_adapter.validate_python(obj)
    assert type(built) is type(validated)
    assert built.model_dump(exclude_unset=True) == validated.model_dump(exclude_unset=True)
    assert built.model_fields_set == validated.model_fields_set


@pytest.mark.parametrize("obj", NEAR_MISSES)
def test_a_near_miss_is_left_to_the_model_and_refused_or_read_the_same(obj: dict[str, Any]) -> None:
    assert not is_plain_request(obj) or obj["method"] == "x\x00" or obj["id"] in (2**63, "\ud800")
    kind, value = _outcome(obj)
    try:
        model = jsonrpc_message_adapter.validate_python(obj)
    except ValidationError:
        assert kind == "refused"
        return
    if kind == "message":
        assert value == model.model_dump(exclude_unset=True)


STRUCTURED = {"content": [{"type": "text", "text": "x"}], "structuredContent": {"result": ["x", 1, None]}}


@pytest.mark.parametrize("version", _handshake_versions())
def test_structured_content_is_let_through_only_where_the_revision_keeps_it(version: str) -> None:
    kept = keeps_structured_content(version)
    assert is_plain_text_result(STRUCTURED, structured=kept) == kept
    assert not is_plain_text_result(STRUCTURED)
    if kept:
        assert serialize_server_result("tools/call", version, STRUCTURED) == STRUCTURED


def test_structured_content_must_be_an_object() -> None:
    assert not is_plain_text_result({"content": [], "structuredContent": ["x"]}, structured=True)


def test_an_unknown_revision_keeps_nothing() -> None:
    assert not keeps_structured_content("1999-01-01")
