"""Fixtures of the suite's tasks scenarios (``tasks-*``: the ``io.modelcontextprotocol/tasks`` extension).

A tool registered with ``task="optional"`` or ``"required"`` is answered with a task when the call
declares the extension (``task="required"``: refused -32021 when it does not); ``task_start="detach"``
runs the handler inside the call until ``ctx.detach()``. Input asked inside a task parks it
``input_required`` until ``tasks/update`` brings the answers.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mcp_server import Context, InputRequest, JSONRPCError, ToolError
from project.mcp_servers import conformance

__all__: list[str] = []

JOB_DELAY = 1.0
"""Seconds the failing jobs work before they fail."""


def _schema(name: str, kind: str = "string") -> dict[str, Any]:
    return {"type": "object", "properties": {name: {"type": kind}}, "required": [name]}


def _given(answer: dict[str, Any], field: str) -> Any:
    content = answer.get("content") or {}
    return content.get(field) if answer.get("action") == "accept" else None


@conformance.tool(structured_output=False)
async def greet(name: str) -> str:
    """Greets by name, synchronously (never a task)."""
    return f"Hello, {name}!"


@conformance.tool(structured_output=False, task="optional")
async def slow_compute(seconds: float = 1.0, label: str = "job") -> str:
    """Works for the given seconds: a task when the call declares the tasks extension."""
    await asyncio.sleep(max(0.0, seconds))
    return f"{label}: computed after {seconds:g}s"


@conformance.tool(structured_output=False, task="required")
async def failing_job() -> str:
    """Runs only as a task, which completes with a tool error (isError) after a second."""
    await asyncio.sleep(JOB_DELAY)
    raise ToolError("failing_job failed on purpose")


@conformance.tool(structured_output=False, task="optional")
async def protocol_error_job() -> str:
    """A task that ends failed with a JSON-RPC error (not a tool error)."""
    await asyncio.sleep(JOB_DELAY / 2)
    raise JSONRPCError(-32603, "protocol_error_job failed on purpose")


@conformance.tool(structured_output=False, task="optional")
async def confirm_delete(filename: str, ctx: Context) -> str:
    """A task that asks the user to confirm (input_required) before it deletes the file."""
    answer = await ctx.elicit(f"Delete {filename}?", _schema("confirm", "boolean"), key="confirm")
    if _given(answer, "confirm") is True:
        return f"Deleted {filename}"
    return f"Kept {filename}"


@conformance.tool(structured_output=False, task="optional")
async def multi_input(ctx: Context) -> str:
    """A task that asks two questions at once; each can be answered on its own."""
    answers = await ctx.input_round(
        {
            "name": InputRequest.elicitation("What is your name?", _schema("name")),
            "color": InputRequest.elicitation("What is your favorite color?", _schema("color")),
        }
    )
    return f"{_given(answers['name'], 'name')} likes {_given(answers['color'], 'color')}"


@conformance.tool(structured_output=False, task="required", task_start="detach")
async def test_tool_with_task(ctx: Context) -> str:
    """Asks a name inside the call (input_required), then goes on as a task that greets it."""
    answer = await ctx.elicit("What is your name?", _schema("name"), key="user_name")
    await ctx.detach()
    await asyncio.sleep(0.2)
    return f"Hello, {_given(answer, 'name')}! (from a task)"
