"""Handlers that misbehave on purpose: the reply guarantee must still answer each request exactly once."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from mcp_server import Context, mcp
from project.mcp_servers import conformance


@mcp.tool
async def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@mcp.tool
async def slow(seconds: float = 30.0) -> str:
    """Sleep, then answer (used for cancels, deadlines and session ends)."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@mcp.tool
def blocking_sleep(seconds: float = 0.5) -> str:
    """A sync handler that blocks its thread; the event loop must stay free."""
    time.sleep(seconds)
    return "done"


@mcp.tool
async def returns_none() -> None:
    """A tool that returns nothing: a valid result with empty content."""
    return None


@mcp.tool
async def raises() -> str:
    """A tool whose body raises: an isError result."""
    raise RuntimeError("boom")


@mcp.tool(timeout=0.5)
async def short_deadline(seconds: float = 5.0) -> str:
    """A tool with its own 0.5 s deadline."""
    await asyncio.sleep(seconds)
    return "too late"


@mcp.tool
async def progress(steps: int, ctx: Context) -> str:
    """Report progress ``steps`` times."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
    return "done"


@mcp.method("test/none")
async def raw_none(params: dict[str, Any], ctx: Context) -> dict[str, Any] | None:
    """A raw method that returns nothing: must be answered with -32603."""
    return None


@mcp.method("test/raise")
async def raw_raise(params: dict[str, Any]) -> dict[str, Any]:
    """A raw method that raises: must be answered with -32603."""
    raise ValueError("raw failure")


@mcp.method("test/echo")
def raw_echo(params: dict[str, Any]) -> dict[str, Any]:
    """A sync raw method."""
    return {"params": params}


@mcp.method("test/stats")
async def raw_stats(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """What this worker holds: in-flight entries (ids of the caller's session), waiting answers, tasks."""
    runtime = ctx.runtime
    assert runtime is not None
    await runtime.writer.flush()  # what is settled is recorded before the ledger is read
    mine = [e.request_id for e in runtime.requests.pending(ctx.session_id) if e.request_id != ctx.request_id]
    ledger_pending = [r for r in await runtime.ledger.apending() if r.request_key != f"i:{ctx.request_id}"]
    return {
        "ledger_pending": len(ledger_pending),
        "inflight": len(runtime.requests) - 1,
        "outbound": len(runtime.outbound),
        "tasks": len(asyncio.all_tasks()),
        "pending": mine,
    }


@mcp.method("test/ledger_pending")
async def raw_ledger_pending(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Pending requests of the caller's session (or ``params["session"]``) in the ledger (any backend)."""
    from mcp_server.ledger import request_key

    runtime = ctx.runtime
    assert runtime is not None
    await runtime.writer.flush()
    own = request_key(ctx.request_id)
    records = await runtime.ledger.apending(str(params.get("session") or ctx.session_id))
    return {"pending": [r.request_id for r in records if r.request_key != own]}


@mcp.method("test/notify")
async def raw_notify(params: dict[str, Any]) -> dict[str, Any]:
    """Send ``resources/updated`` for ``params["uri"]`` or ``list_changed`` for ``params["feature"]``."""
    from mcp_server.updates import anotify_list_changed, anotify_resource_updated

    if "uri" in params:
        return {"notified": await anotify_resource_updated(str(params["uri"]))}
    return {"notified": await anotify_list_changed(str(params["feature"]))}


# The test site also serves the conformance fixtures at /mcp, so that live-server tests can use them there.
mcp.include(conformance)
