"""The shapes recognised without pydantic (mcp_server.wire.shapes) are exactly what the models return
unchanged: each fast answer is held to the model's own."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from mcp_types.jsonrpc import jsonrpc_message_adapter
from mcp_types.methods import serialize_server_result
from pydantic import ValidationError

from mcp_server.wire.errors import JSONRPCError
from mcp_server.wire.jsonrpc import parse_message
from mcp_server.wire.shapes import (
    is_plain_call_params,
    is_plain_request,
    is_plain_text_result,
    keeps_structured_content,
)
from mcp_server.wire.versions import SUPPORTED_VERSIONS
from tests.support.schemas import schema_accepts_call

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


# -- tools/call params recognised without the schema ------------------------------------------------------

MODERN = "2026-07-28"
MODERN_META: dict[str, Any] = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {"sampling": {}, "elicitation": {"form": {}}},
    "io.modelcontextprotocol/clientInfo": {"name": "mcp", "version": "2.3.0"},
}
CALL_PARAMS: list[tuple[str, dict[str, Any]]] = [
    ("2025-11-25", {"name": "echo", "arguments": {"text": "hi"}}),
    ("2025-11-25", {"name": "echo"}),
    ("2025-11-25", {"name": "", "arguments": None, "extra": [1]}),
    ("2025-11-25", {"name": "echo", "arguments": {}, "_meta": {"progressToken": 7}}),
    (MODERN, {"name": "echo", "arguments": {"text": "hi"}, "_meta": MODERN_META}),
    (MODERN, {"name": "echo", "_meta": {**MODERN_META, "io.modelcontextprotocol/logLevel": "debug"}}),
    (MODERN, {"name": "echo", "_meta": {**MODERN_META, "io.modelcontextprotocol/clientCapabilities": {}}}),
]
CALL_NEAR_MISSES: list[tuple[str, dict[str, Any]]] = [
    ("2025-11-25", {"name": 1}),
    ("2025-11-25", {"arguments": {}}),
    ("2025-11-25", {"name": "echo", "arguments": ["text"]}),
    ("2025-11-25", {"name": "echo", "_meta": {"progressToken": [1]}}),
    ("2025-11-25", {"name": "echo", "_meta": "x"}),
    ("2025-11-25", {"name": "echo", "task": {"ttl": "soon"}}),
    (MODERN, {"name": "echo"}),
    (MODERN, {"name": "echo", "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}}),
    (MODERN, {"name": "echo", "_meta": {**MODERN_META, "io.modelcontextprotocol/clientInfo": {"name": "x"}}}),
    (MODERN, {"name": "echo", "_meta": {**MODERN_META, "io.modelcontextprotocol/clientCapabilities": []}}),
    (MODERN, {"name": "echo", "_meta": MODERN_META, "requestState": 5}),
    (MODERN, {"name": "echo", "_meta": MODERN_META, "inputResponses": []}),
    ("1999-01-01", {"name": "echo"}),
]


@pytest.mark.parametrize(("version", "params"), CALL_PARAMS)
def test_plain_call_params_are_what_the_schema_accepts(version: str, params: dict[str, Any]) -> None:
    assert schema_accepts_call(version, params)
    assert is_plain_call_params(params, version)
    assert is_plain_call_params(params, version)  # remembered: the same answer


@pytest.mark.parametrize(("version", "params"), CALL_NEAR_MISSES)
def test_call_params_the_schema_may_refuse_are_left_to_it(version: str, params: dict[str, Any]) -> None:
    """Each near miss goes to the schema (which refuses all but the ones it reads as it likes), never the
    fast answer: a ``_meta`` refused once is not taken for one accepted."""
    assert not is_plain_call_params(params, version)
    assert not is_plain_call_params(params, version)
    if not schema_accepts_call(version, params):
        return
    pytest.fail(f"the schema accepts {params!r}: it belongs in CALL_PARAMS")


def test_a_remembered_meta_is_told_apart_from_a_near_copy() -> None:
    """The key reads back to the decoded value: ``"1"`` and ``1`` are different metas."""
    good = {
        "name": "echo",
        "_meta": {**MODERN_META, "io.modelcontextprotocol/clientInfo": {"name": "a", "version": "1"}},
    }
    bad = {
        "name": "echo",
        "_meta": {**MODERN_META, "io.modelcontextprotocol/clientInfo": {"name": "a", "version": 1}},
    }
    assert is_plain_call_params(good, MODERN)
    assert not schema_accepts_call(MODERN, bad)
    assert not is_plain_call_params(bad, MODERN)


def test_the_meta_key_reads_back_to_the_value_and_to_no_other() -> None:
    """orjson's JSON is the key unless it cannot tell values apart (NaN and ``None`` both come out
    ``null``) or refuses one (an integer past 64 bits): then the ``repr``, which can."""
    from mcp_server.wire.shapes import _faithful_text

    keys = [_faithful_text({"v": value}) for value in (1, 1.0, True, "1", None, float("nan"), 2**70)]
    assert len(set(keys)) == len(keys)
    assert isinstance(keys[0], bytes)
    assert all(isinstance(key, str) for key in keys[4:])  # null in the JSON, or refused by orjson

    class Text(str):
        pass

    when = datetime.datetime(2026, 12, 6, tzinfo=datetime.UTC)
    assert _faithful_text({"v": Text("x")}) == repr({"v": Text("x")})
    assert _faithful_text({"v": when}) == repr({"v": when})
    with_null = {**MODERN_META, "io.modelcontextprotocol/clientInfo": {"name": "a", "version": None}}
    assert not schema_accepts_call(MODERN, {"name": "echo", "_meta": with_null})
    assert not is_plain_call_params({"name": "echo", "_meta": with_null}, MODERN)


def test_a_large_meta_is_validated_each_time_not_remembered() -> None:
    meta = {**MODERN_META, "io.modelcontextprotocol/clientInfo": {"name": "a" * 5000, "version": "1"}}
    before = _meta_cache_size()
    assert schema_accepts_call(MODERN, {"name": "echo", "_meta": meta})
    assert not is_plain_call_params(
        {"name": "echo", "_meta": meta}, MODERN
    )  # left to the schema, which accepts
    assert _meta_cache_size() == before


def test_the_remembered_metas_stay_within_their_bound() -> None:
    for index in range(600):
        info = {"name": f"client-{index}", "version": "1"}
        assert is_plain_call_params(
            {"name": "echo", "_meta": {**MODERN_META, "io.modelcontextprotocol/clientInfo": info}}, MODERN
        )
    assert _meta_cache_size() <= 256


def _meta_cache_size() -> int:
    from mcp_server.wire.shapes import _meta_passes

    return int(_meta_passes.cache_info().currsize)
