"""The ``initialize`` answer in process: the negotiated revision, a capability for each kind of thing
registered (and none for what is not), the tasks extension of a 2026-07-28 server, ``serverInfo`` and
``instructions`` from the server or else the settings."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_server.protocol.lifecycle import (
    initialize_result,
    server_capabilities,
    server_info,
    sessionless_capabilities,
)
from mcp_server.registry.server import MCPServer
from mcp_server.wire.v2026_07_28 import TASKS_EXTENSION
from mcp_server.wire.versions import LATEST_VERSION, SUPPORTED_VERSIONS


def everything() -> MCPServer:
    server = MCPServer("all-kinds")

    @server.tool
    async def echo(text: str) -> str:
        """Echoes."""
        return text

    @server.resource("kinds://fixed")
    async def fixed() -> str:
        """A resource."""
        return "fixed"

    @server.prompt
    async def greet(name: str) -> str:
        """A prompt."""
        return f"hello {name}"

    @server.completion(prompt="greet")
    async def names(argument: str, value: str, context: dict[str, Any]) -> list[str]:
        return ["ada"]

    return server


def test_an_empty_server_declares_logging_only() -> None:
    assert server_capabilities(MCPServer("empty")) == {"logging": {}}


def test_each_kind_registered_gets_its_capability() -> None:
    assert server_capabilities(everything()) == {
        "logging": {},
        "tools": {"listChanged": True},
        "resources": {"subscribe": True, "listChanged": True},
        "prompts": {"listChanged": True},
        "completions": {},
    }


def test_a_server_with_tools_only_declares_tools_only() -> None:
    server = MCPServer("tools-only")

    @server.tool
    async def echo(text: str) -> str:
        """Echoes."""
        return text

    assert server_capabilities(server) == {"logging": {}, "tools": {"listChanged": True}}


def test_the_tasks_extension_is_declared_only_with_a_task_tool() -> None:
    server = everything()
    assert "extensions" not in sessionless_capabilities(server)

    @server.tool(task="optional")
    async def slow() -> str:
        """Runs as a task."""
        return "done"

    capabilities = sessionless_capabilities(server)
    assert capabilities["extensions"] == {TASKS_EXTENSION: {}}
    assert capabilities["tools"] == {"listChanged": True}


def test_server_info_comes_from_the_settings_without_a_title(settings: Any) -> None:
    settings.MCP_SERVER = {**settings.MCP_SERVER, "SERVER_NAME": "site", "SERVER_VERSION": "1.2"}
    settings.MCP_SERVER = {**settings.MCP_SERVER, "SERVER_TITLE": None}
    assert server_info(MCPServer()) == {"name": "site", "version": "1.2"}


def test_server_info_prefers_the_servers_own_and_carries_a_title(settings: Any) -> None:
    settings.MCP_SERVER = {**settings.MCP_SERVER, "SERVER_TITLE": "Site title"}
    assert server_info(MCPServer("own", version="9.9"))["title"] == "Site title"
    assert server_info(MCPServer("own", version="9.9", title="Own title")) == {
        "name": "own",
        "version": "9.9",
        "title": "Own title",
    }


@pytest.mark.parametrize("requested", [*SUPPORTED_VERSIONS])
def test_initialize_answers_a_supported_revision_with_itself(requested: str) -> None:
    result = initialize_result(everything(), {"protocolVersion": requested})
    assert result["protocolVersion"] == requested
    assert result["capabilities"] == server_capabilities(everything())
    assert result["serverInfo"]["name"] == "all-kinds"


@pytest.mark.parametrize("requested", [None, "1999-01-01", 20250326])
def test_initialize_answers_an_unknown_revision_with_the_latest(requested: Any) -> None:
    params = {} if requested is None else {"protocolVersion": requested}
    assert initialize_result(everything(), params)["protocolVersion"] == LATEST_VERSION


def test_instructions_only_when_set(settings: Any) -> None:
    settings.MCP_SERVER = {**settings.MCP_SERVER, "INSTRUCTIONS": None}
    assert "instructions" not in initialize_result(MCPServer("quiet"), {})
    assert initialize_result(MCPServer("own", instructions="Use me."), {})["instructions"] == "Use me."
    settings.MCP_SERVER = {**settings.MCP_SERVER, "INSTRUCTIONS": "From the site."}
    assert initialize_result(MCPServer("quiet"), {})["instructions"] == "From the site."
    assert initialize_result(MCPServer("own", instructions="Use me."), {})["instructions"] == "Use me."
