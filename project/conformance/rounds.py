"""Fixtures of the suite's multi round-trip scenarios (``input-required-result.ts``, 2026-07-28).

Written as any handler is: ``ctx.elicit``, ``ctx.sample``, ``ctx.list_roots`` and ``ctx.input_round``. At
2026-07-28 each ask without an answer makes the call answer ``input_required`` (the keys are the ones the
scenarios name); in a handshake-era session the same handlers send real requests to the client.
"""

from __future__ import annotations

from typing import Any

from mcp_server import Context, InputRequest
from project.mcp_servers import conformance

__all__: list[str] = []


def _schema(name: str, kind: str = "string") -> dict[str, Any]:
    return {"type": "object", "properties": {name: {"type": kind}}, "required": [name]}


def _content(answer: dict[str, Any], field: str) -> str:
    """The accepted answer's ``field``, or what the user did instead (declined, cancelled)."""
    content = answer.get("content") or {}
    if answer.get("action") != "accept" or field not in content:
        return f"({answer.get('action', 'no answer')})"
    return str(content[field])


NAME_QUESTION = "What is your name?"


@conformance.tool(structured_output=False)
async def test_input_required_result_elicitation(ctx: Context) -> str:
    """Asks the user's name (one elicitation round, key ``user_name``)."""
    answer = await ctx.elicit(NAME_QUESTION, _schema("name"), key="user_name")
    return f"Hello, {_content(answer, 'name')}!"


@conformance.tool(structured_output=False)
async def test_input_required_result_sampling(ctx: Context) -> str:
    """Asks the client's model a question (one sampling round, key ``capital_question``)."""
    result = await ctx.sample("What is the capital of France?", max_tokens=100, key="capital_question")
    content = result.get("content")
    text = content.get("text") if isinstance(content, dict) else None
    return f"The model answered: {text if text is not None else content!r}"


@conformance.tool(structured_output=False)
async def test_input_required_result_list_roots(ctx: Context) -> str:
    """Lists the client's roots (one roots round, key ``client_roots``)."""
    roots = await ctx.list_roots(key="client_roots")
    return "Roots: " + (", ".join(str(root.get("uri")) for root in roots) or "none")


@conformance.tool(structured_output=False)
async def test_input_required_result_request_state(ctx: Context) -> str:
    """Asks for a confirmation; the answer comes back with the signed requestState (key ``confirm``)."""
    answer = await ctx.elicit("Please confirm", _schema("ok", "boolean"), key="confirm")
    return f"state-ok: confirmed={_content(answer, 'ok')}"


@conformance.tool(structured_output=False)
async def test_input_required_result_multiple_inputs(ctx: Context) -> str:
    """Asks an elicitation, a sampling and the roots in one round."""
    answers = await ctx.input_round(
        {
            "user_name": InputRequest.elicitation(NAME_QUESTION, _schema("name")),
            "greeting": InputRequest.sampling("Generate a greeting", max_tokens=50),
            "client_roots": InputRequest.roots(),
        }
    )
    greeting = answers["greeting"].get("content")
    text = greeting.get("text") if isinstance(greeting, dict) else greeting
    roots = answers["client_roots"].get("roots") or []
    return f"{text} {_content(answers['user_name'], 'name')} ({len(roots)} roots)"


@conformance.tool(structured_output=False)
async def test_input_required_result_multi_round(ctx: Context) -> str:
    """Asks two questions, one round each (keys ``step1``, ``step2``)."""
    name = await ctx.elicit("Step 1: What is your name?", _schema("name"), key="step1")
    color = await ctx.elicit("Step 2: What is your favorite color?", _schema("color"), key="step2")
    return f"{_content(name, 'name')} likes {_content(color, 'color')}"


@conformance.tool(structured_output=False)
async def test_input_required_result_tampered_state(ctx: Context) -> str:
    """Asks for a confirmation; a requestState altered on the way back is refused (-32602)."""
    answer = await ctx.elicit("Please confirm", _schema("ok", "boolean"), key="confirm")
    return f"state-ok: confirmed={_content(answer, 'ok')}"


@conformance.tool(structured_output=False)
async def test_input_required_result_capabilities(ctx: Context) -> str:
    """Asks only what the request's client capabilities allow: elicitation if declared, else sampling."""
    declared = ctx.session.client_capabilities
    if "elicitation" in declared:
        answer = await ctx.elicit(NAME_QUESTION, _schema("name"), key="user_name")
        return f"Hello, {_content(answer, 'name')}!"
    if "sampling" in declared:
        result = await ctx.sample("Generate a greeting", max_tokens=50, key="greeting")
        return f"Sampled: {result.get('content')}"
    return "The client declared neither elicitation nor sampling."


@conformance.prompt
async def test_input_required_result_prompt(ctx: Context) -> str:
    """A prompt that asks the user for its context first (key ``user_context``)."""
    question = "What context should the prompt use?"
    answer = await ctx.elicit(question, _schema("context"), key="user_context")
    return f"Answer with this context in mind: {_content(answer, 'context')}"
