"""Input rounds (MRTR) at 2026-07-28: ``ctx.elicit``, ``ctx.sample``, ``ctx.list_roots`` and
``ctx.input_round`` answer ``input_required`` and take their answers from the retry.

Each test builds a real :class:`Context` with a 2026 ``SessionState`` (as the modern transports do: no
session id, the capabilities of the request's ``_meta``) and runs it under the reply guarantee
(:func:`answer`), the layer that turns the handler's need for input into the result. The results are
checked against the 2026 schema (``mcp_types``), as the official client does.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from mcp_types.methods import validate_server_result

from mcp_server.core.context import Context, SessionState
from mcp_server.core.rounds import InputRequest
from mcp_server.core.states import State
from mcp_server.protocol.guarantee import answer
from mcp_server.protocol.peer import RequestPeer
from mcp_server.protocol.rounds import open_rounds
from mcp_server.registry.server import MCPServer
from mcp_server.runtime.outbound import OutboundTable
from mcp_server.wire.jsonrpc import JSONRPCResponse, WireError
from mcp_server.wire.versions import SESSIONLESS_VERSIONS
from tests.support.peers import RecordingPeer

MODERN = "2026-07-28"
ALL = {"elicitation": {}, "sampling": {}, "roots": {"listChanged": True}}
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
ALICE = {"action": "accept", "content": {"name": "Alice"}}
BLUE = {"action": "accept", "content": {"color": "blue"}}
GREETING = {
    "role": "assistant",
    "content": {"type": "text", "text": "Hi"},
    "model": "m",
    "stopReason": "endTurn",
}
ROOTS = {"roots": [{"uri": "file:///test/root", "name": "Test Root"}]}

server = MCPServer("rounds-units")
RUNS: list[str] = []
"""One entry per run of a handler (they re-run from the start on each retry)."""


@server.tool
async def ask_name(ctx: Context) -> str:
    """Asks the user's name."""
    RUNS.append("ask_name")
    answer = await ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name")
    return f"Hello, {answer['content']['name']}!"


@server.tool
async def two_questions(ctx: Context, topic: str = "") -> str:
    """Asks two things, one after the other (two rounds)."""
    name = await ctx.elicit("Name?", NAME_SCHEMA)
    color = await ctx.elicit("Color?", {"type": "object", "properties": {"color": {"type": "string"}}})
    return f"{name['content']['name']} likes {color['content']['color']}"


@server.tool
async def all_three(ctx: Context) -> str:
    """Asks the three kinds of input in one round."""
    answers = await ctx.input_round(
        {
            "user_name": InputRequest.elicitation("What is your name?", NAME_SCHEMA),
            "greeting": InputRequest.sampling("Generate a greeting", max_tokens=50),
            "client_roots": InputRequest.roots(),
        }
    )
    roots = answers["client_roots"]["roots"]
    return f"{answers['greeting']['content']['text']} {answers['user_name']['content']['name']}, {len(roots)}"


@server.tool
async def needs_sampling(ctx: Context) -> str:
    """Samples."""
    result = await ctx.sample("Say hi")
    return str(result["content"]["text"])


@server.prompt
async def ask_prompt(ctx: Context) -> str:
    """A prompt that asks for context."""
    answer = await ctx.elicit("Context?", {"type": "object", "properties": {"context": {"type": "string"}}})
    return f"Use {answer['content']['context']}"


@server.prompt
async def other_prompt(ctx: Context) -> str:
    """Another prompt that asks for context."""
    answer = await ctx.elicit("Context?", {"type": "object", "properties": {"context": {"type": "string"}}})
    return f"Other {answer['content']['context']}"


@server.resource("test://roots", mime_type="text/plain")
async def roots_resource(ctx: Context) -> str:
    """Lists the client's roots."""
    return ",".join(root["uri"] for root in await ctx.list_roots())


@server.method("units/ask")
async def raw_ask(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    await ctx.elicit("No rounds here", NAME_SCHEMA)
    return {}


def meta(capabilities: dict[str, Any]) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }


def modern(method: str, params: dict[str, Any], caps: dict[str, Any] | None = None) -> Context:
    """A 2026 request's context, as the modern transports build it."""
    caps = ALL if caps is None else caps
    return Context(
        server=server,
        session=SessionState(id=None, protocol_version=MODERN, client_capabilities=caps),
        request_id=9,
        method=method,
        params=json.loads(json.dumps({**params, "_meta": meta(caps)})),
        peer=RecordingPeer(),
    )


async def call(method: str, params: dict[str, Any], caps: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run one request under the reply guarantee; an input round is a settled answer like any other."""
    response, state = await answer(modern(method, params, caps))
    assert state == State.ANSWERED
    if "result" in response:
        validate_server_result(method, MODERN, response["result"])
    return response


def tool(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "arguments": {}, **extra}


def text_of(response: dict[str, Any]) -> str:
    assert response["result"]["resultType"] == "complete", response
    return str(response["result"]["content"][0]["text"])


@pytest.fixture(autouse=True)
def _clean() -> None:
    RUNS.clear()


def test_the_modern_versions() -> None:
    assert SESSIONLESS_VERSIONS == ("2026-07-28",)


async def test_an_ask_without_an_answer_is_an_input_required_round() -> None:
    result = (await call("tools/call", tool("ask_name")))["result"]
    assert result["resultType"] == "input_required"
    assert result["inputRequests"] == {
        "user_name": {
            "method": "elicitation/create",
            "params": {"mode": "form", "message": "What is your name?", "requestedSchema": NAME_SCHEMA},
        }
    }
    assert isinstance(result["requestState"], str)
    assert result["requestState"]


async def test_the_retry_with_the_answer_completes() -> None:
    first = (await call("tools/call", tool("ask_name")))["result"]
    retry = tool("ask_name", inputResponses={"user_name": ALICE}, requestState=first["requestState"])
    assert text_of(await call("tools/call", retry)) == "Hello, Alice!"
    assert RUNS == ["ask_name", "ask_name"]  # the handler ran again from the start


async def test_an_answer_without_a_state_is_taken_and_unknown_keys_are_ignored() -> None:
    responses = {"user_name": ALICE, "unknown_extra_key": "x", "another_unexpected": {"a": 1}}
    assert text_of(await call("tools/call", tool("ask_name", inputResponses=responses))) == "Hello, Alice!"


async def test_an_answer_with_a_lone_surrogate_is_refused_before_the_handler_sees_it() -> None:
    """The user's text, stored by the handler: a lone surrogate (a JSON escape, no text) is -32602."""
    unreadable = {"action": "accept", "content": {"name": "Al\udfffice"}}
    error = (await call("tools/call", tool("ask_name", inputResponses={"user_name": unreadable})))["error"]
    assert error["code"] == -32602
    assert error["message"] == (
        "inputResponses['user_name'] is not a valid elicitation/create result: content.name: "
        "a string holds a lone UTF-16 surrogate"
    )
    assert RUNS == ["ask_name"]  # up to its ask, which raised: the answer never reached it


async def test_a_missing_answer_is_asked_again() -> None:
    result = (await call("tools/call", tool("ask_name", inputResponses={"wrong_key": ALICE})))["result"]
    assert result["resultType"] == "input_required"
    assert list(result["inputRequests"]) == ["user_name"]


async def test_two_sequential_asks_are_two_rounds_and_the_state_carries_the_first_answer() -> None:
    args = {"name": "two_questions", "arguments": {"topic": "t"}}
    first = (await call("tools/call", args))["result"]
    assert list(first["inputRequests"]) == ["elicitation-1"]
    second = (
        await call(
            "tools/call",
            {**args, "inputResponses": {"elicitation-1": ALICE}, "requestState": first["requestState"]},
        )
    )["result"]
    assert second["resultType"] == "input_required"
    assert list(second["inputRequests"]) == ["elicitation-2"]
    assert second["requestState"] != first["requestState"]
    # the client resends only the latest round's answers: the first one travels in the state
    third = {**args, "inputResponses": {"elicitation-2": BLUE}, "requestState": second["requestState"]}
    assert text_of(await call("tools/call", third)) == "Alice likes blue"
    # without that state, the first answer is missing again and is asked again
    stateless = (await call("tools/call", {**args, "inputResponses": {"elicitation-2": BLUE}}))["result"]
    assert list(stateless["inputRequests"]) == ["elicitation-1"]


async def test_three_kinds_in_one_round() -> None:
    first = (await call("tools/call", tool("all_three")))["result"]
    assert first["inputRequests"] == {
        "user_name": {
            "method": "elicitation/create",
            "params": {"mode": "form", "message": "What is your name?", "requestedSchema": NAME_SCHEMA},
        },
        "greeting": {
            "method": "sampling/createMessage",
            "params": {
                "messages": [{"role": "user", "content": {"type": "text", "text": "Generate a greeting"}}],
                "maxTokens": 50,
            },
        },
        "client_roots": {"method": "roots/list", "params": {}},
    }
    responses = {"user_name": ALICE, "greeting": GREETING, "client_roots": ROOTS}
    retry = tool("all_three", inputResponses=responses, requestState=first["requestState"])
    assert text_of(await call("tools/call", retry)) == "Hi Alice, 1"


async def test_a_prompt_and_a_resource_ask_too() -> None:
    prompt = (await call("prompts/get", {"name": "ask_prompt"}))["result"]
    assert prompt["inputRequests"]["elicitation-1"]["method"] == "elicitation/create"
    answered = {"action": "accept", "content": {"context": "test context"}}
    retry = {"name": "ask_prompt", "inputResponses": {"elicitation-1": answered}}
    done = (await call("prompts/get", {**retry, "requestState": prompt["requestState"]}))["result"]
    assert done["messages"][0]["content"]["text"] == "Use test context"
    read = (await call("resources/read", {"uri": "test://roots"}))["result"]
    assert read["inputRequests"] == {"roots-1": {"method": "roots/list", "params": {}}}


@pytest.mark.parametrize(
    "alter",
    [
        pytest.param(lambda state: state + "-TAMPERED", id="tampered"),
        pytest.param(lambda state: "not-a-state", id="garbage"),
    ],
)
async def test_an_altered_state_is_refused_and_nothing_runs(alter: Any) -> None:
    first = (await call("tools/call", tool("ask_name")))["result"]
    RUNS.clear()
    retry = tool("ask_name", inputResponses={"user_name": ALICE}, requestState=alter(first["requestState"]))
    error = (await call("tools/call", retry))["error"]
    assert error["code"] == -32602
    assert error["message"].startswith("Invalid or expired requestState")
    assert error["data"] == {"reason": "invalid_request_state"}
    assert RUNS == []


async def test_a_state_is_refused_on_another_call() -> None:
    first = (await call("tools/call", {"name": "two_questions", "arguments": {"topic": "a"}}))["result"]
    for other in (
        {"name": "two_questions", "arguments": {"topic": "b"}},  # other arguments
        {"name": "ask_name", "arguments": {"topic": "a"}},  # another tool
    ):
        retry = {**other, "requestState": first["requestState"]}
        error = (await call("tools/call", retry))["error"]
        assert error["code"] == -32602
        assert "another request" in error["message"]


async def test_a_prompts_state_is_refused_on_another_prompt() -> None:
    first = (await call("prompts/get", {"name": "ask_prompt"}))["result"]
    answered = {"action": "accept", "content": {"context": "c"}}
    retry = {"name": "other_prompt", "inputResponses": {"elicitation-1": answered}}
    error = (await call("prompts/get", {**retry, "requestState": first["requestState"]}))["error"]
    assert error["code"] == -32602
    assert "another request" in error["message"]


async def test_an_expired_state_is_refused(settings: Any) -> None:
    first = (await call("tools/call", tool("ask_name")))["result"]
    settings.MCP_SERVER = {**settings.MCP_SERVER, "REQUEST_STATE_MAX_AGE": 1e-9}
    error = (await call("tools/call", tool("ask_name", requestState=first["requestState"])))["error"]
    assert error["code"] == -32602
    assert "expired" in error["message"]


@pytest.mark.parametrize(
    ("name", "caps", "required"),
    [
        ("ask_name", {}, {"elicitation": {"form": {}}}),
        ("ask_name", {"elicitation": {"url": {}}}, {"elicitation": {"form": {}}}),
        ("needs_sampling", {"elicitation": {}}, {"sampling": {}}),
        ("all_three", {"sampling": {}}, {"elicitation": {"form": {}}, "roots": {}}),
    ],
)
async def test_an_undeclared_capability_is_minus_32021(
    name: str, caps: dict[str, Any], required: dict[str, Any]
) -> None:
    error = (await call("tools/call", tool(name), caps))["error"]
    assert error["code"] == -32021
    assert error["data"] == {"requiredCapabilities": required}


async def test_form_elicitation_is_served_by_an_explicit_form_capability() -> None:
    result = (await call("tools/call", tool("ask_name"), {"elicitation": {"form": {}, "url": {}}}))["result"]
    assert result["resultType"] == "input_required"


@pytest.mark.parametrize("responses", [{"user_name": 12345}, {"user_name": {"action": "maybe"}}, None, [1]])
async def test_a_malformed_answer_is_minus_32602(responses: Any) -> None:
    error = (await call("tools/call", tool("ask_name", inputResponses=responses)))["error"]
    assert error["code"] == -32602
    assert "inputResponses" in error["message"]


async def test_only_tools_prompts_and_resources_can_ask() -> None:
    assert open_rounds(modern("tools/list", {})) is None
    assert open_rounds(modern("prompts/list", {})) is None
    assert open_rounds(modern("tools/call", tool("ask_name"))) is not None
    error = (await call("units/ask", {}))["error"]
    assert error["code"] == -32603
    assert "cannot ask the client for input" in error["message"]


# -- the handshake era is unchanged: real server-to-client requests -----------------------------------------


class Loopback(RequestPeer):
    """A handshake-era request's transport whose client is the test."""

    def __init__(self, outbound: OutboundTable) -> None:
        super().__init__(outbound)
        self.sent: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    @property
    def session_id(self) -> str | None:
        return "legacy"

    async def emit(self, message: dict[str, Any]) -> bool:
        self.sent.put_nowait(message)
        return True


def legacy(method: str, params: dict[str, Any], outbound: OutboundTable) -> tuple[Context, Loopback]:
    peer = Loopback(outbound)
    session = SessionState(id="legacy", protocol_version="2025-11-25", client_capabilities=ALL)
    ctx = Context(server=server, session=session, request_id=3, method=method, params=params, peer=peer)
    return ctx, peer


async def test_a_handshake_session_still_sends_requests_to_the_client() -> None:
    outbound = OutboundTable()
    ctx, peer = legacy("tools/call", tool("ask_name"), outbound)
    running = asyncio.create_task(answer(ctx))
    async with asyncio.timeout(5):
        asked = await peer.sent.get()
    assert asked["method"] == "elicitation/create"
    assert asked["params"]["mode"] == "form"
    assert outbound.resolve("legacy", JSONRPCResponse(jsonrpc="2.0", id=asked["id"], result=ALICE))
    response, _state = await running
    assert response["result"]["content"][0]["text"] == "Hello, Alice!"
    assert "resultType" not in response["result"]


async def test_a_handshake_input_round_sends_every_request_at_once() -> None:
    outbound = OutboundTable()
    ctx, peer = legacy("tools/call", tool("all_three"), outbound)
    running = asyncio.create_task(answer(ctx))
    async with asyncio.timeout(5):
        asked = [await peer.sent.get() for _ in range(3)]
    assert [a["method"] for a in asked] == ["elicitation/create", "sampling/createMessage", "roots/list"]
    assert "params" not in asked[2]  # roots/list without params, as before
    answers = {"elicitation/create": ALICE, "sampling/createMessage": GREETING, "roots/list": ROOTS}
    for a in reversed(asked):
        outbound.resolve("legacy", JSONRPCResponse(jsonrpc="2.0", id=a["id"], result=answers[a["method"]]))
    response, _state = await running
    assert response["result"]["content"][0]["text"] == "Hi Alice, 1"


async def test_a_failed_answer_in_a_handshake_input_round_stops_waiting_for_the_others() -> None:
    outbound = OutboundTable()
    ctx, peer = legacy("tools/call", tool("all_three"), outbound)
    running = asyncio.create_task(answer(ctx))
    async with asyncio.timeout(5):
        asked = [await peer.sent.get() for _ in range(3)]
    refusal = WireError(jsonrpc="2.0", id=asked[0]["id"], error={"code": -1, "message": "The user closed it"})
    assert outbound.resolve("legacy", refusal)
    response, _state = await running
    assert response["error"]["message"] == "The user closed it"
    assert len(outbound) == 0  # nobody waits for the other two answers any more
