"""``@mcp.tool(input_schema=...)``: an explicit schema is listed as given."""

from __future__ import annotations

import pytest

from mcp_server.core.context import Context
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


async def test_a_tool_with_an_explicit_schema_may_take_free_arguments() -> None:
    server = MCPServer("input-schema-test-3")
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {}}}

    @server.tool(input_schema=schema, output_schema={"type": "object"})
    async def echo(ctx: Context, limit: int = 2, **arguments: object) -> dict[str, object]:
        """Returns what it was given."""
        return {"arguments": arguments, "limit": limit, "ctx": type(ctx).__name__}

    tool = server.tools["echo"]
    assert tool.definition()["inputSchema"] == schema
    assert tool.definition()["outputSchema"] == {"type": "object"}
    context = Context.__new__(Context)
    # the raw arguments pass through unvalidated; named parameters are still validated, the Context injected
    result = await tool.call({"a": "not validated", "b": [1], "limit": 5, "ctx": "spoofed"}, context)
    assert result["structuredContent"] == {
        "arguments": {"a": "not validated", "b": [1]},
        "limit": 5,
        "ctx": "Context",
    }
    refused = await tool.call({"limit": "many"}, context)
    assert refused["isError"] is True
    assert "limit" in refused["content"][0]["text"]


def test_free_arguments_need_an_explicit_schema() -> None:
    server = MCPServer("input-schema-test-4")
    with pytest.raises(TypeError, match="explicit input_schema"):

        @server.tool
        async def loose(**arguments: object) -> str:
            return ""

    with pytest.raises(TypeError, match="output_schema must be"):

        @server.tool(input_schema={"type": "object"}, output_schema={"type": "array"})
        async def listed(**arguments: object) -> str:
            return ""
