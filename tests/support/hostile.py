"""Hostile input for the I10 fuzz tests: hypothesis strategies for what a client can send, a renderer that
writes it as raw bytes, a strict reader of what the server sends back, and the oracle that says which ids
must be answered.

A body is a Python structure that may hold three markers :func:`render` writes as raw bytes: :class:`Deep`
(arrays nested ``depth`` deep, beyond what a test process could build or encode), :class:`Huge` (a number
past every float, read as an infinity) and :class:`Raw` (bytes that are not UTF-8, such as an encoded
surrogate). Strings go out escaped (``json.dumps``), so lone
surrogates and NUL characters are valid JSON escapes.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from mcp_server.wire.jsonrpc import MAX_DEPTH
from tests.support.raw import content_type

__all__ = [
    "FUZZ",
    "Deep",
    "Huge",
    "Raw",
    "acceptable_id",
    "bodies",
    "check_answers",
    "deep_reader",
    "id_key",
    "may_fail_to_parse",
    "plainly_valid_request",
    "read_http",
    "render",
    "sentinel",
    "single_messages",
    "strict_json",
]

FUZZ = settings(
    max_examples=int(os.environ.get("MCP_FUZZ_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
"""The fuzz tests' settings: ``MCP_FUZZ_EXAMPLES`` examples each (60 unless set), no deadline (a live
server answers each)."""


def sentinel(data: bytes) -> bytes:
    """``data`` as a 2026-07-28 header carries what is not plain ASCII: ``=?base64?<data>?=``."""
    return b"=?base64?" + base64.b64encode(data) + b"?="


UNSENDABLE = "the response could not be sent as JSON"
"""The -32603 of a handler whose result JSON cannot carry (``test/echo`` of a lone surrogate or ``1e400``)."""

MAX_ID_LENGTH = 198
"""The ledger's column holds ``s:<id>`` of ids up to this long; longer ones are keyed by their hash."""
INT_ID_RANGE = (-(2**63), 2**63 - 1)


@dataclass(frozen=True)
class Deep:
    """``depth`` nested empty arrays."""

    depth: int


@dataclass(frozen=True)
class Huge:
    """A number past every float (``1e400``, ``-1e400``): valid JSON, read as an infinity."""

    negative: bool = False


@dataclass(frozen=True)
class Raw:
    """Bytes written into the body as they are (inside a string: not UTF-8)."""

    data: bytes


def render(value: Any) -> bytes:
    """``value`` as JSON bytes, markers written raw; strings ASCII-escaped (lone surrogates included)."""
    if isinstance(value, Deep):
        return b"[" * value.depth + b"]" * value.depth
    if isinstance(value, Huge):
        return b"-1e400" if value.negative else b"1e400"
    if isinstance(value, Raw):
        return b'"' + value.data + b'"'
    if isinstance(value, dict):
        items = (render(str(k)) + b":" + render(v) for k, v in value.items())
        return b"{" + b",".join(items) + b"}"
    if isinstance(value, list):
        return b"[" + b",".join(render(v) for v in value) + b"]"
    return json.dumps(value).encode()  # NaN and Infinity as Python writes them: not JSON


def may_fail_to_parse(value: Any) -> bool:
    """Whether a server may refuse the whole body as unparseable (-32700) without being wrong."""
    if isinstance(value, Raw):
        return True
    if isinstance(value, Deep):
        # Past MAX_DEPTH levels in all, counting the (few) containers around it, the body is refused.
        return value.depth > MAX_DEPTH - 16
    if isinstance(value, float):
        return value != value or value in (float("inf"), float("-inf"))
    if isinstance(value, dict):
        return any(may_fail_to_parse(v) for v in value.values())
    if isinstance(value, list):
        return any(may_fail_to_parse(v) for v in value)
    return False


def strict_json(data: bytes) -> Any:
    """What a strict client reads: UTF-8 (an encoded surrogate is not) holding JSON without NaN/Infinity."""

    def refuse(name: str) -> Any:
        raise AssertionError(f"{name} is not JSON: {data[:200]!r}")

    return json.loads(data.decode("utf-8"), parse_constant=refuse)


def acceptable_id(value: Any) -> bool:
    """Whether a request with this id must be answered with it (the server's rules, written out again)."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        return False
    if isinstance(value, int):
        return INT_ID_RANGE[0] <= value <= INT_ID_RANGE[1]
    if "\x00" in value:
        return False
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def id_key(value: Any) -> tuple[str, Any] | None:
    """An id as JSON tells ids apart (``1`` and ``"1"`` differ; ``true`` is no id); ``None`` for no id."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    return (type(value).__name__, value)


# -- strategies ----------------------------------------------------------------------------------------------

ODD_STRINGS = ["\ud800", "\udfff", "\ud83d", "a\ud800b", "\x00", "a\x00b", "\ufffd", "\u2028", "", "🎉"]

hostile_text = st.one_of(
    st.text(st.characters(exclude_categories=()), max_size=12),  # lone surrogates included
    st.sampled_from(ODD_STRINGS),
    st.integers(min_value=MAX_ID_LENGTH - 2, max_value=MAX_ID_LENGTH + 3).map(lambda n: "x" * n),
    st.integers(min_value=1_000, max_value=20_000).map(lambda n: "n" * n),
)

hostile_ids = st.one_of(
    st.integers(min_value=INT_ID_RANGE[0], max_value=INT_ID_RANGE[1]),
    st.sampled_from([INT_ID_RANGE[0] - 1, INT_ID_RANGE[1] + 1, 2**64, -(2**64), 10**30, 0]),
    hostile_text,
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from([10**40, -(10**40), 2**63]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1e308, 5e-324, -0.0]),
    hostile_text,
)

json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(hostile_text, children, max_size=4)
    ),
    max_leaves=12,
)

markers = st.one_of(
    st.integers(min_value=1, max_value=3_000).map(Deep),
    st.sampled_from([Deep(100_000), Raw(b"\xed\xa0\x80"), Raw(b"\xff"), Raw(b"a\xc3")]),
    st.sampled_from([float("nan"), float("inf"), float("-inf")]),  # written NaN, Infinity: not JSON
    st.sampled_from([Huge(), Huge(negative=True)]),  # written 1e400: JSON, read as an infinity
)

KNOWN_METHODS = [
    "ping",
    "tools/call",
    "tools/list",
    "prompts/get",
    "resources/read",
    "test/echo",
    "initialize",
    "resources/subscribe",
    "completion/complete",
    "logging/setLevel",
    "tasks/get",
    "tasks/cancel",
    "prompts/list",
]

methods = st.one_of(
    st.sampled_from(KNOWN_METHODS), hostile_text, st.sampled_from(["m" * 101, "tools/\x00call"])
)


@st.composite
def params_for(draw: st.DrawFn, method: str) -> Any:
    """Params shaped for the method (mostly), with hostile values where the client chooses them."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.one_of(json_values, markers))
    text = st.one_of(hostile_text, markers)
    params: dict[str, Any] = {}
    if method == "tools/call":
        name = draw(
            st.one_of(st.sampled_from(["echo", "echo", "progress", "returns_none", "raises"]), hostile_text)
        )
        arguments = {"steps": draw(st.integers(0, 3))} if name == "progress" else {"text": draw(text)}
        params = {"name": name, "arguments": arguments}
    elif method == "prompts/get":
        arguments = {"arg1": draw(text), "arg2": draw(hostile_text)}
        name = draw(st.sampled_from(["test_prompt_with_arguments", "\ud800", "x\x00"]))
        params = {"name": name, "arguments": arguments}
    elif method in ("resources/read", "resources/subscribe"):
        params = {"uri": draw(st.one_of(st.just("test://static-text"), hostile_text))}
    elif method == "completion/complete":
        ref = draw(
            st.one_of(
                st.fixed_dictionaries(
                    {"type": st.just("ref/prompt"), "name": st.just("test_prompt_with_arguments")}
                ),
                st.fixed_dictionaries({"type": st.just("ref/resource"), "uri": hostile_text}),
                json_values,
            )
        )
        params = {
            "ref": ref,
            "argument": {"name": draw(st.sampled_from(["arg1", "\ud800"])), "value": draw(text)},
        }
    elif method == "logging/setLevel":
        params = {"level": draw(st.one_of(st.sampled_from(["debug", "error", "emergency"]), hostile_text))}
    elif method in ("tasks/get", "tasks/cancel"):
        params = {"taskId": draw(hostile_text)}
    elif method == "prompts/list":
        params = {"cursor": draw(st.one_of(hostile_text, markers))}
    elif method == "test/echo":
        params = {"value": draw(st.one_of(json_values, markers))}
    elif method == "initialize":
        params = {
            "protocolVersion": draw(st.one_of(st.sampled_from(["2025-11-25", "2025-03-26"]), hostile_text)),
            "capabilities": draw(
                st.one_of(st.just({}), st.dictionaries(hostile_text, json_values, max_size=2))
            ),
            "clientInfo": {"name": draw(hostile_text), "version": draw(hostile_text)},
        }
    if draw(st.integers(0, 4)) == 0:
        params["_meta"] = {"progressToken": draw(hostile_ids)}
    return params


@st.composite
def requests(draw: st.DrawFn) -> Any:
    """A JSON-RPC-like message: a request, a notification, a response, or something in between."""
    method = draw(methods)
    message: dict[str, Any] = {"jsonrpc": draw(st.sampled_from(["2.0"] * 8 + ["1.0", None]))}
    if message["jsonrpc"] is None:
        del message["jsonrpc"]
    shape = draw(st.sampled_from(["request"] * 6 + ["notification", "response", "odd"]))
    if shape in ("request", "notification", "odd"):
        message["method"] = method if shape != "odd" else draw(st.one_of(json_values, methods))
        if draw(st.booleans()) or method == "tools/call":
            message["params"] = draw(params_for(method))
    if shape in ("request", "response", "odd"):
        message["id"] = draw(hostile_ids)
    if shape == "response":
        message[draw(st.sampled_from(["result", "error"]))] = draw(json_values)
    return message


single_messages = st.one_of(requests(), requests(), requests(), json_values, markers)

bodies = st.one_of(
    single_messages,
    st.lists(st.one_of(requests(), requests(), json_values), min_size=1, max_size=6),
)


# -- the oracle ----------------------------------------------------------------------------------------------


def check_answers(elements: list[Any], answers: list[dict[str, Any]]) -> None:
    """The answers a body of ``elements`` got (already read strictly): well-formed, and each request whose id
    is acceptable answered exactly once with its id (an id shared with other elements: at least once per
    request, at most once per element)."""
    for answer in answers:
        assert answer.get("jsonrpc") == "2.0", answer
        assert ("result" in answer) != ("error" in answer), answer
        if "error" in answer:
            assert isinstance(answer["error"].get("code"), int), answer
            assert isinstance(answer["error"].get("message"), str), answer
            if answer["error"]["code"] == -32603:  # a client's input is never the server's fault, but
                assert UNSENDABLE in answer["error"]["message"], answer  # an echo of it may be unsendable
    got = Counter(id_key(a.get("id")) for a in answers)
    requests_by_id: Counter[tuple[str, Any] | None] = Counter()
    elements_by_id: Counter[tuple[str, Any] | None] = Counter()
    for element in elements:
        key = id_key(element.get("id")) if isinstance(element, dict) else None
        if key is None:
            continue
        elements_by_id[key] += 1
        if "method" in element and acceptable_id(element["id"]):
            requests_by_id[key] += 1
    for key, count in requests_by_id.items():
        assert count <= got[key] <= elements_by_id[key], (key, count, got[key], answers)
    for key, count in got.items():
        if key is not None:
            assert count <= elements_by_id[key], (key, answers)  # never an answer to an id not sent
    assert got[None] <= len(elements), answers


@pytest.fixture(autouse=True)
def deep_reader() -> Iterator[None]:
    """The server may echo values nested ~1000 deep: more than the default recursion limit lets this client
    read at the depth of a test."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(10_000)
    yield
    sys.setrecursionlimit(limit)


def read_http(response: httpx.Response) -> list[dict[str, Any]]:
    """The messages of a response, read strictly (every one must be a JSON object)."""
    assert response.status_code < 500, response.text[:2000]
    if response.status_code == 202:
        assert response.content == b""
        return []
    if content_type(response) == "application/json":
        body = strict_json(response.content)
        messages = body if isinstance(body, list) else [body]
    else:
        assert content_type(response) == "text/event-stream", response.headers
        messages = []
        for block in response.content.split(b"\n\n"):
            data = [line[5:].lstrip(b" ") for line in block.split(b"\n") if line.startswith(b"data:")]
            if any(data):  # (a priming event has empty data)
                messages.append(strict_json(b"\n".join(data)))
    assert all(isinstance(m, dict) for m in messages), messages
    return messages


def plainly_valid_request(body: Any) -> bool:
    """A single request any server must serve: JSON-RPC 2.0, a usable method, an acceptable id."""
    if not isinstance(body, dict) or may_fail_to_parse(body) or {"result", "error"} & set(body):
        return False
    method = body.get("method")
    return (
        body.get("jsonrpc") == "2.0"
        and isinstance(method, str)
        and method.isascii()
        and "\x00" not in method
        and "id" in body
        and acceptable_id(body["id"])
        and (body.get("params") is None or isinstance(body["params"], dict))
    )
