"""A ``tools/call`` ``_meta`` is remembered by the part its schema reads (``mcp_server.wire.meta_key``): a
client that puts something new in every request (a ``traceparent``, a progress token) is validated once,
and the fast answer stays the schema's answer for every ``_meta``, new keys and odd values included."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field
from pydantic.fields import FieldInfo

from mcp_server.wire.meta_key import _accepted_whole, schema_part, typed_keys
from mcp_server.wire.shapes import _meta_passes, is_plain_call_params
from mcp_server.wire.versions import SUPPORTED_VERSIONS
from tests.support.schemas import schema_accepts_call

MODERN = "2026-07-28"
ENVELOPE: dict[str, Any] = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "agent", "version": "1.0"},
}
VERSIONS = ["2025-11-25", MODERN]


def _envelope(version: str) -> dict[str, Any]:
    return dict(ENVELOPE) if version == MODERN else {}


@pytest.mark.parametrize("version", VERSIONS)
def test_a_meta_new_in_every_request_is_validated_once_per_kind_of_token(version: str) -> None:
    _meta_passes.cache_clear()
    for request_id in range(300):
        for token in (request_id, f"token-{request_id}"):
            meta = {
                **_envelope(version),
                "progressToken": token,
                "traceparent": f"00-{request_id:032x}-{request_id:016x}-01",
                "com.example/request": {"id": request_id, "tags": ["a", request_id]},
            }
            assert is_plain_call_params({"name": "echo", "_meta": meta}, version)
    assert _meta_passes.cache_info().currsize == 2  # an int token and a str token: one verdict each
    assert _meta_passes.cache_info().misses == 2


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("token", [1.5, 2.0, True, None, [1], {"id": 1}, "", -(2**80)])
def test_a_token_of_another_type_gets_the_schemas_own_verdict(version: str, token: Any) -> None:
    params = {"name": "echo", "_meta": {**_envelope(version), "progressToken": token}}
    if schema_accepts_call(version, params):
        assert is_plain_call_params(params, version) or not isinstance(token, str | int)
    else:
        assert not is_plain_call_params(params, version)


def test_the_typed_keys_are_read_off_the_schema() -> None:
    """What the fast answer leans on, read off ``mcp-types``: a token takes any ``str`` or ``int``; at
    2026-07-28 the revision any ``str``; the client's info and capabilities are validated."""
    for version in VERSIONS:
        typed = typed_keys(version)
        assert typed is not None
        assert typed["progressToken"] == {str, int}
        assert "traceparent" not in typed
    modern = typed_keys(MODERN)
    assert modern is not None
    assert modern["io.modelcontextprotocol/protocolVersion"] == {str}
    assert modern["io.modelcontextprotocol/clientInfo"] == frozenset()
    assert modern["io.modelcontextprotocol/logLevel"] == frozenset()
    assert typed_keys("1999-01-01") is None


def test_a_constrained_field_is_never_taken_whole() -> None:
    assert _accepted_whole(FieldInfo.from_annotation(str | int | None)) == {str, int}
    constrained = FieldInfo.from_annotation(Annotated[str, Field(max_length=3)])
    assert _accepted_whole(constrained) == frozenset()
    assert _accepted_whole(FieldInfo.from_annotation(bool | None)) == frozenset()


def test_the_schema_part_keeps_what_the_schema_reads() -> None:
    meta = {"io.modelcontextprotocol/clientInfo": {"name": "a", "version": "1"}}
    assert schema_part(meta, MODERN) == meta
    unknown = {"progressToken": 1, "x": 2}
    assert schema_part(unknown, "1999-01-01") is unknown  # a schema it does not know: read whole
    assert schema_part({"x": 1, "progressToken": "t", "y": 2}, "2025-11-25") == {"progressToken": ""}


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
_keys = st.sampled_from(
    [
        "progressToken",
        "traceparent",
        "io.modelcontextprotocol/protocolVersion",
        "io.modelcontextprotocol/clientInfo",
        "io.modelcontextprotocol/clientCapabilities",
        "io.modelcontextprotocol/logLevel",
        "progress_token",
        "x",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    version=st.sampled_from(SUPPORTED_VERSIONS),
    base=st.booleans(),
    extra=st.dictionaries(_keys, _json | st.sampled_from(["debug", MODERN, {}]), max_size=4),
)
def test_the_fast_answer_is_never_yes_where_the_schema_says_no(
    version: str, base: bool, extra: dict[str, Any]
) -> None:
    meta = {**(ENVELOPE if base else {}), **extra}
    params = {"name": "echo", "_meta": meta}
    for _ in range(2):  # the first answer, then the remembered one
        if is_plain_call_params(params, version):
            assert schema_accepts_call(version, params), meta
