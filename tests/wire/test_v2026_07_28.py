"""The pure checks of the 2026-07-28 ladder: envelope, routing headers (with the Base64 sentinel),
version, method, ``Mcp-Param-*`` headers and the ``x-mcp-header`` annotation rules."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_server.wire.errors import JSONRPCError
from mcp_server.wire.v2026_07_28 import (
    check_envelope,
    check_method,
    check_param_headers,
    check_routing_headers,
    check_version,
    decode_header_value,
    has_envelope,
    http_status,
    invalid_x_mcp_header,
    is_sessionless_header,
)

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def code_of(fn: Any, *args: Any) -> int:
    with pytest.raises(JSONRPCError) as caught:
        fn(*args)
    return caught.value.code


def test_era_markers() -> None:
    assert is_sessionless_header("2026-07-28")
    assert is_sessionless_header("v999.0.0")  # unknown: the 2026 path answers -32022
    assert not is_sessionless_header("2025-11-25")
    assert not is_sessionless_header(None)
    assert has_envelope({"_meta": META})
    assert not has_envelope({"_meta": {"progressToken": 1}})
    assert not has_envelope(None)


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"_meta": []},
        {"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}},
        {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}},
        {"_meta": {**META, "io.modelcontextprotocol/protocolVersion": 2026}},
        {"_meta": {**META, "io.modelcontextprotocol/clientCapabilities": []}},
    ],
)
def test_a_bad_envelope_is_invalid_params(params: dict[str, Any]) -> None:
    assert code_of(check_envelope, params) == -32602


def test_client_info_is_optional() -> None:
    assert check_envelope({"_meta": META}) is META


def test_unsupported_version_names_both() -> None:
    with pytest.raises(JSONRPCError) as caught:
        check_version({**META, "io.modelcontextprotocol/protocolVersion": "1900-01-01"})
    assert caught.value.code == -32022
    assert caught.value.data == {"supported": ["2026-07-28"], "requested": "1900-01-01"}
    assert check_version(META) == "2026-07-28"


@pytest.mark.parametrize("method", ["initialize", "ping", "logging/setLevel", "resources/subscribe", "x/y"])
def test_removed_and_unknown_methods(method: str) -> None:
    assert code_of(check_method, method, {}) == -32601
    check_method(method, {method: object()})  # a raw method the server registers is served


def test_status_of_each_code() -> None:
    assert [http_status(c) for c in (-32700, -32600, -32602, -32020, -32021, -32022, -32601, -32603)] == [
        400,
        400,
        400,
        400,
        400,
        400,
        404,
        200,
    ]


@pytest.mark.parametrize(
    ("value", "decoded"),
    [
        ("=?base64?SGVsbG8=?=", "Hello"),
        ("=?base64?w6k=?=", "é"),
        ("SGVsbG8=", "SGVsbG8="),  # bare Base64 is a literal
        ("=?base64?SGVsbG8=", "=?base64?SGVsbG8="),  # no suffix: a literal
        ("=?BASE64?SGVsbG8=?=", "=?BASE64?SGVsbG8=?="),  # markers are case-sensitive
    ],
)
def test_header_values_are_decoded(value: str, decoded: str) -> None:
    assert decode_header_value(value) == decoded


@pytest.mark.parametrize("value", ["=?base64?SGVsbG8?=", "=?base64?SGVs!!!bG8=?=", "=?base64?/w==?="])
def test_a_malformed_sentinel_is_a_mismatch(value: str) -> None:
    assert code_of(decode_header_value, value) == -32020


def headers(**values: str | list[str]) -> dict[str, list[str]]:
    out = {"mcp-protocol-version": ["2026-07-28"], "mcp-method": ["tools/call"], "mcp-name": ["echo"]}
    for name, value in values.items():
        key = name.replace("_", "-")
        if value == "":
            out.pop(key)
        else:
            out[key] = value if isinstance(value, list) else [value]
    return out


PARAMS = {"name": "echo", "_meta": META}


@pytest.mark.parametrize(
    "sent",
    [
        headers(mcp_protocol_version=""),
        headers(mcp_protocol_version="2025-11-25"),
        headers(mcp_method=""),
        headers(mcp_method="TOOLS/CALL"),
        headers(mcp_name=""),
        headers(mcp_name="other"),
        headers(mcp_method=["tools/call", "tools/call"]),
    ],
)
def test_routing_header_mismatches(sent: dict[str, list[str]]) -> None:
    assert code_of(check_routing_headers, sent, "tools/call", PARAMS) == -32020


def test_routing_headers_accepted() -> None:
    check_routing_headers(headers(mcp_name=" echo\t"), "tools/call", PARAMS)
    check_routing_headers(headers(mcp_name="=?base64?ZWNobw==?="), "tools/call", PARAMS)
    listed = {"mcp-protocol-version": ["2026-07-28"], "mcp-method": ["tools/list"], "mcp-name": ["x"]}
    check_routing_headers(listed, "tools/list", {"_meta": META})  # no name field: Mcp-Name ignored


SCHEMA = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "count": {"type": "integer", "x-mcp-header": "Count"},
        "nested": {"type": "object", "properties": {"on": {"type": "boolean", "x-mcp-header": "On"}}},
    },
}


def param(**values: str) -> dict[str, list[str]]:
    return {f"mcp-param-{k}": [v] for k, v in values.items()}


def test_param_headers_match_the_arguments() -> None:
    args = {"region": "eu", "count": 42, "nested": {"on": True}}
    check_param_headers(SCHEMA, args, param(region="eu", count="42", on="true"))
    check_param_headers(SCHEMA, {}, {})  # absent in the body, absent in the headers
    check_param_headers(SCHEMA, {"count": 42}, param(count="42.0"))


@pytest.mark.parametrize(
    ("args", "sent"),
    [
        ({"region": "eu"}, {}),  # in the body, not in the headers
        ({}, param(region="eu")),  # in the headers, not in the body
        ({"region": "eu"}, param(region="us")),
        ({"nested": {"on": False}}, param(on="true")),
    ],
)
def test_param_header_mismatches(args: dict[str, Any], sent: dict[str, list[str]]) -> None:
    assert code_of(check_param_headers, SCHEMA, args, sent) == -32020


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"properties": {"x": {"type": "number", "x-mcp-header": "X"}}}, "string, integer or boolean"),
        ({"properties": {"x": {"type": "string", "x-mcp-header": "A B"}}}, "not a header name token"),
        ({"properties": {"x": {"type": "string", "x-mcp-header": ""}}}, "not a header name token"),
        (
            {
                "properties": {
                    "x": {"type": "string", "x-mcp-header": "Dup"},
                    "y": {"type": "string", "x-mcp-header": "dup"},
                }
            },
            "declared twice",
        ),
        (
            {"properties": {"x": {"type": "array", "items": {"type": "string", "x-mcp-header": "I"}}}},
            "through 'properties' only",
        ),
    ],
)
def test_invalid_annotations(schema: dict[str, Any], problem: str) -> None:
    found = invalid_x_mcp_header({"type": "object", **schema})
    assert found is not None
    assert problem in found
    assert invalid_x_mcp_header(SCHEMA) is None
