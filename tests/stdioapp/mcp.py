"""Tools that print to stdout, wait to be cancelled or report who calls them; and a second server."""

from __future__ import annotations

import asyncio
import logging
import os
import sys

from mcp_server import Context, MCPServer, mcp
from mcp_server.runtime import Runtime

logger = logging.getLogger("tests.stdioapp")

other = MCPServer("other")
"""A second server, served with ``mcp_stdio --server other`` or ``--server tests.stdioapp.mcp.other``."""


@mcp.tool
def stdio_noisy(text: str) -> str:
    """Write ``text`` to stdout in every way user code might, and log it: all of it must reach stderr."""
    print(f"print: {text}")
    sys.__stdout__.write(f"sys.__stdout__: {text}\n")
    sys.__stdout__.flush()
    os.write(1, f"fd 1: {text}\n".encode())
    logger.warning("logged: %s", text)
    return text


@mcp.tool
async def stdio_wait_for_cancel(ctx: Context) -> str:
    """Report progress once (the request is in flight), then wait until cancelled."""
    await ctx.report_progress(1, 2, "waiting")
    await asyncio.sleep(600)
    return "not cancelled"


@mcp.tool
async def stdio_pending(ctx: Context) -> list[str]:
    """Ids of the caller's session still in flight in this process, besides this request."""
    assert isinstance(ctx.runtime, Runtime)
    pending = ctx.runtime.requests.pending(ctx.session_id)
    return [str(e.request_id) for e in pending if e.request_id != ctx.request_id]


@mcp.tool
async def stdio_whoami(ctx: Context) -> str:
    """The username whose permissions apply, or ``anonymous``."""
    return str(getattr(ctx.user, "username", "") or "anonymous")


@mcp.tool(permission="auth.view_user")
async def stdio_staff_only() -> str:
    """Visible only to users with ``auth.view_user``."""
    return "secret"


@other.tool
async def only_on_other() -> str:
    """The second server's one tool."""
    return "other"
