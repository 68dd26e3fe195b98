"""The conformance suite's MRTR scenarios (``input-required-result.ts``) replayed on the demo site's fixtures
(``project/conformance/rounds.py``) in process, with the requests the suite sends (caps ``{sampling,
elicitation, roots}`` unless the scenario says otherwise). The transport is not the subject here.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp_types.methods import validate_server_result

from mcp_server.core.context import Context, SessionState
from mcp_server.core.states import State
from mcp_server.protocol.guarantee import answer
from project.mcp_servers import conformance
from tests.support.peers import RecordingPeer

MODERN = "2026-07-28"
CAPS = {"sampling": {}, "elicitation": {}, "roots": {"listChanged": True}}
ALICE = {"action": "accept", "content": {"name": "Alice"}}
PARIS = {
    "role": "assistant",
    "content": {"type": "text", "text": "The capital of France is Paris."},
    "model": "test-model",
    "stopReason": "endTurn",
}
ROOTS = {"roots": [{"uri": "file:///test/root", "name": "Test Root"}]}


async def call(
    name: str, caps: dict[str, Any] | None = None, method: str = "tools/call", **extra: Any
) -> dict[str, Any]:
    caps = CAPS if caps is None else caps
    params: dict[str, Any] = {"name": name, **({"arguments": {}} if method == "tools/call" else {}), **extra}
    params["_meta"] = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": caps,
    }
    ctx = Context(
        server=conformance,
        session=SessionState(id=None, protocol_version=MODERN, client_capabilities=caps),
        request_id=1,
        method=method,
        params=json.loads(json.dumps(params)),
        peer=RecordingPeer(),
    )
    response, state = await answer(ctx)
    assert state == State.ANSWERED
    if "result" in response:
        validate_server_result(method, MODERN, response["result"])
    return response


def complete_text(response: dict[str, Any]) -> str:
    result = response["result"]
    assert result["resultType"] == "complete", result
    return str(result["content"][0]["text"])


@pytest.mark.parametrize(
    ("tool", "key", "method", "reply", "expected"),
    [
        ("test_input_required_result_elicitation", "user_name", "elicitation/create", ALICE, "Hello, Alice!"),
        ("test_input_required_result_sampling", "capital_question", "sampling/createMessage", PARIS, "Paris"),
        ("test_input_required_result_list_roots", "client_roots", "roots/list", ROOTS, "file:///test/root"),
    ],
)
async def test_basic_rounds(tool: str, key: str, method: str, reply: dict[str, Any], expected: str) -> None:
    first = (await call(tool))["result"]
    assert first["resultType"] == "input_required"
    assert first["inputRequests"][key]["method"] == method
    retry = await call(tool, inputResponses={key: reply}, requestState=first["requestState"])
    assert expected in complete_text(retry)


async def test_request_state_round_trip() -> None:
    first = (await call("test_input_required_result_request_state"))["result"]
    assert isinstance(first["requestState"], str)
    assert first["inputRequests"]
    reply = {"confirm": {"action": "accept", "content": {"ok": True}}}
    done = await call("test_input_required_result_request_state", inputResponses=reply, **state_of(first))
    assert "state-ok" in complete_text(done)


def state_of(result: dict[str, Any]) -> dict[str, Any]:
    return {"requestState": result["requestState"]}


async def test_multiple_inputs_in_one_round() -> None:
    first = (await call("test_input_required_result_multiple_inputs"))["result"]
    methods = {request["method"] for request in first["inputRequests"].values()}
    assert methods == {"elicitation/create", "sampling/createMessage", "roots/list"}
    replies = {"user_name": ALICE, "greeting": PARIS, "client_roots": ROOTS}
    done = await call("test_input_required_result_multiple_inputs", inputResponses=replies, **state_of(first))
    assert complete_text(done).endswith("Alice (1 roots)")


async def test_multi_round() -> None:
    tool = "test_input_required_result_multi_round"
    first = (await call(tool))["result"]
    assert list(first["inputRequests"]) == ["step1"]
    second = (await call(tool, inputResponses={"step1": ALICE}, **state_of(first)))["result"]
    assert list(second["inputRequests"]) == ["step2"]
    assert second["requestState"] != first["requestState"]
    blue = {"action": "accept", "content": {"color": "blue"}}
    assert (
        complete_text(await call(tool, inputResponses={"step2": blue}, **state_of(second)))
        == "Alice likes blue"
    )


async def test_missing_extra_and_invalid_responses() -> None:
    tool = "test_input_required_result_elicitation"
    reasked = (await call(tool, inputResponses={"wrong_key": ALICE}))["result"]
    assert reasked["resultType"] == "input_required"
    extra = {"user_name": ALICE, "unknown_extra_key": {"x": 1}, "another_unexpected": "y"}
    assert complete_text(await call(tool, inputResponses=extra)) == "Hello, Alice!"
    for invalid in ({"user_name": 12345}, None):
        assert "error" in await call(tool, inputResponses=invalid)


async def test_tampered_state_is_an_error() -> None:
    tool = "test_input_required_result_tampered_state"
    first = (await call(tool))["result"]
    reply = {"confirm": {"action": "accept", "content": {"ok": True}}}
    error = (await call(tool, inputResponses=reply, requestState=first["requestState"] + "-TAMPERED"))[
        "error"
    ]
    assert error["code"] == -32602


async def test_capabilities_decide_what_is_asked() -> None:
    result = (await call("test_input_required_result_capabilities", {"sampling": {}}))["result"]
    assert result["resultType"] == "input_required"
    assert [r["method"] for r in result["inputRequests"].values()] == ["sampling/createMessage"]


async def test_the_prompt_asks_then_renders() -> None:
    name = "test_input_required_result_prompt"
    first = (await call(name, method="prompts/get"))["result"]
    assert first["inputRequests"]["user_context"]["method"] == "elicitation/create"
    reply = {"user_context": {"action": "accept", "content": {"context": "test context"}}}
    done = (await call(name, method="prompts/get", inputResponses=reply, **state_of(first)))["result"]
    assert "test context" in done["messages"][0]["content"]["text"]
