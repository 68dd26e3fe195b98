"""The official MCP Python SDK's server with the benchmark's echo tool, for side-by-side runs.

uvicorn bench.sdk_server:json_app       # streamable HTTP, JSON responses, stateful
uvicorn bench.sdk_server:sse_app        # streamable HTTP, SSE responses, stateful
uvicorn bench.sdk_server:sessions_app   # JSON responses, stateful, no cap on open sessions

Each also answers 2026-07-28 requests (no handshake, the revision in the ``MCP-Protocol-Version`` header and
the request's ``_meta``): the SDK's session manager routes any header naming no handshake revision to its
single-exchange path, ``stateless_http`` or not. ``sessions_app`` is for the handshake and memory rows of
``bench/compare.py``: the SDK caps open sessions at 10,000 by default and answers 503 past that, which those
rows (sessions opened and left open) would reach; this project has no such cap.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer

__all__ = ["json_app", "sessions_app", "sse_app"]


def _server() -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer("sdk-bench")

    @server.tool()
    async def echo(text: str) -> str:
        """Echo the text back."""
        return text

    @server.tool()
    def echo_sync(text: str) -> str:
        """Echo the text back, from a sync handler (the SDK runs it in a worker thread, as this project)."""
        return text

    return server


json_app = _server().streamable_http_app(json_response=True)
sse_app = _server().streamable_http_app(json_response=False)
sessions_app = _server().streamable_http_app(json_response=True, max_sessions=None)
