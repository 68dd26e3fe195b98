"""The official MCP Python SDK's server with the benchmark's echo tool, for side-by-side runs.

uvicorn bench.sdk_server:json_app     # streamable HTTP, JSON responses, stateful
uvicorn bench.sdk_server:sse_app      # streamable HTTP, SSE responses, stateful
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer

__all__ = ["json_app", "sse_app"]


def _server() -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer("sdk-bench")

    @server.tool()
    async def echo(text: str) -> str:
        """Echo the text back."""
        return text

    return server


json_app = _server().streamable_http_app(json_response=True)
sse_app = _server().streamable_http_app(json_response=False)
