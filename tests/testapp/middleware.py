"""MCP middleware used by the tests: they must run inside the reply guarantee, never around it."""

from __future__ import annotations

from typing import Any

from mcp_server import Context, JSONRPCError
from mcp_server.protocol.middleware import GetResponse

SEEN: list[str] = []


def count_calls(get_response: GetResponse) -> GetResponse:
    """Adds the count of requests this worker has seen to every ``ping`` result."""

    async def middleware(ctx: Context) -> dict[str, Any] | None:
        SEEN.append(ctx.method)
        result = await get_response(ctx)
        if ctx.method == "ping" and result is not None:
            result = {**result, "_meta": {"seen": len(SEEN)}}
        return result

    return middleware


def misbehave(get_response: GetResponse) -> GetResponse:
    """Refuses ``test/echo`` (rate limit), returns nothing for ``tools/list``, raises on ``prompts/list``."""

    async def middleware(ctx: Context) -> dict[str, Any] | None:
        if ctx.method == "test/echo":
            raise JSONRPCError(-32029, "Rate limited")
        if ctx.method == "tools/list":
            return None
        if ctx.method == "prompts/list":
            raise RuntimeError("middleware bug")
        return await get_response(ctx)

    return middleware
