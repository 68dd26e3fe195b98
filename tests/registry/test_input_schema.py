"""``@mcp.tool(input_schema=...)``: an explicit schema is listed as given."""

from __future__ import annotations

import pytest

from mcp_server.registry.server import MCPServer
from project.conformance.mcp import JSON_SCHEMA_2020_12


def test_explicit_input_schema_is_listed_unchanged() -> None:
    server = MCPServer("input-schema-test")

    @server.tool(input_schema=JSON_SCHEMA_2020_12)
    async def contact(name: str | None = None) -> str:
        """A tool whose schema the signature cannot express."""
        return name or ""

    listed = server.tools["contact"].definition()["inputSchema"]
    assert listed == JSON_SCHEMA_2020_12
    assert {"$schema", "$defs", "allOf", "if", "then", "else", "additionalProperties"} <= set(listed)


def test_input_schema_must_describe_an_object() -> None:
    server = MCPServer("input-schema-test-2")
    with pytest.raises(TypeError, match="type 'object'"):

        @server.tool(input_schema={"type": "string"})
        async def bad() -> str:
            return ""
