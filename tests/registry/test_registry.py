"""The registry: decorators, schemas from type hints, and how tool and method outcomes are answered (the same
through a live server: ``tests/end_to_end/registry/test_registry.py``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import mcp_types as mt
import pytest
from django.core.exceptions import ImproperlyConfigured
from pydantic import BaseModel

from mcp_server import Context, MCPServer, ToolError
from mcp_server.wire.errors import INVALID_PARAMS, JSONRPCError


class Point(BaseModel):
    x: int
    y: int


# -- decorators (plain unit tests on a fresh server) ---------------------------------------------------------


def test_decorators_with_and_without_arguments() -> None:
    server = MCPServer("x")

    @server.tool
    async def plain(a: int) -> int:
        """Plain tool.

        More text that is not part of the description."""
        return a

    @server.tool(name="renamed", title="Renamed", description="Given description")
    def original_name() -> str:
        return "x"

    @server.prompt
    async def bare_prompt(topic: str) -> str:
        return topic

    @server.prompt(name="named_prompt", title="Named")
    def other_prompt() -> str:
        return "p"

    @server.resource("res://fixed", mime_type="text/plain")
    async def fixed() -> str:
        return "fixed"

    @server.resource("res://items/{item_id}")
    async def item(item_id: int) -> str:
        return str(item_id)

    @server.method("x/custom")
    async def custom(params: dict[str, Any]) -> dict[str, Any]:
        return params

    # The decorators hand back the function itself.
    assert server.tools["plain"].fn is plain
    assert server.tools["renamed"].fn is original_name
    assert server.prompts["bare_prompt"].fn is bare_prompt
    assert server.prompts["named_prompt"].fn is other_prompt
    assert server.resources["res://fixed"].fn is fixed
    assert server.methods["x/custom"] is custom

    assert set(server.tools) == {"plain", "renamed"}
    assert set(server.prompts) == {"bare_prompt", "named_prompt"}
    assert server.tools["plain"].definition()["description"] == "Plain tool."
    renamed = server.tools["renamed"].definition()
    assert (renamed["name"], renamed["title"], renamed["description"]) == (
        "renamed",
        "Renamed",
        "Given description",
    )
    assert server.prompts["named_prompt"].definition()["title"] == "Named"
    assert server.prompts["bare_prompt"].definition()["arguments"] == [{"name": "topic", "required": True}]
    assert not server.resources["res://fixed"].is_template
    assert server.resources["res://items/{item_id}"].is_template
    found = server.find_resource("res://items/7")
    assert found is not None
    assert found[0].fn is item
    assert found[1] == {"item_id": "7"}


def _register_twice(register: Callable[[Callable[..., Any]], Any]) -> None:
    async def first() -> str:
        return "1"

    async def second() -> str:
        return "2"

    register(first)
    register(second)


@pytest.mark.parametrize(
    "kind",
    ["tool", "named tool", "prompt", "named prompt", "resource", "method"],
)
def test_duplicate_names_raise_improperly_configured(kind: str) -> None:
    server = MCPServer("x")
    registrars: dict[str, Callable[[Callable[..., Any]], Any]] = {
        "tool": lambda fn: server.tool(name="same")(fn),
        "named tool": lambda fn: server.tool(name="dup")(fn),
        "prompt": lambda fn: server.prompt(name="same")(fn),
        "named prompt": lambda fn: server.prompt(name="dup")(fn),
        "resource": lambda fn: server.resource("res://same")(fn),
        "method": lambda fn: server.method("x/same")(fn),
    }
    with pytest.raises(ImproperlyConfigured, match="already registered"):
        _register_twice(registrars[kind])


def test_duplicate_bare_tool_name_raises() -> None:
    server = MCPServer("x")

    async def echo(text: str) -> str:
        return text

    server.tool(echo)
    with pytest.raises(ImproperlyConfigured):
        server.tool(echo)
    # A different name for the same function is fine.
    server.tool(name="echo2")(echo)
    assert set(server.tools) == {"echo", "echo2"}


@pytest.mark.parametrize(
    "name",
    [
        "tools/call",
        "initialize",
        "ping",
        "notifications/anything",
        # Once missing from the registry's own list, so registering them passed and was never called:
        "server/discover",
        "subscriptions/listen",
        "tasks/get",
        "tasks/update",
        "tasks/cancel",
    ],
)
def test_builtin_methods_cannot_be_overridden(name: str) -> None:
    with pytest.raises(ImproperlyConfigured, match="built in"):
        MCPServer("x").method(name)


def test_every_method_the_dispatcher_answers_is_refused_by_the_registry() -> None:
    from mcp_server.protocol.dispatcher import BUILTINS

    for name in [*BUILTINS, "initialize"]:
        with pytest.raises(ImproperlyConfigured, match="built in"):
            MCPServer("x").method(name)
    # A method of no revision stays the site's own.
    MCPServer("x").method("tasks/list")(lambda params: {})


def test_servers_are_independent() -> None:
    first, second = MCPServer("a"), MCPServer("b")

    @first.tool
    async def only_here() -> str:
        return ""

    assert "only_here" in first.tools
    assert "only_here" not in second.tools


# -- input schema from type hints ----------------------------------------------------------------------------


async def plot(
    label: str, point: Point, ctx: Context, scale: float = 1.0, tags: list[str] | None = None
) -> str:
    """Plot a point."""
    return f"{label} {point.x},{point.y} x{scale} {tags}"


def test_input_schema_from_type_hints() -> None:
    server = MCPServer("x")
    server.tool(plot)
    schema = server.tools["plot"].definition()["inputSchema"]
    assert schema["type"] == "object"
    assert set(schema["properties"]) == {"label", "point", "scale", "tags"}  # no ctx
    assert set(schema["required"]) == {"label", "point"}
    assert schema["properties"]["label"]["type"] == "string"
    assert schema["properties"]["scale"]["type"] == "number"
    assert schema["properties"]["scale"]["default"] == 1.0
    assert schema["properties"]["tags"]["default"] is None
    ref = schema["properties"]["point"]["$ref"]
    model = schema["$defs"][ref.rsplit("/", 1)[-1]]
    assert set(model["required"]) == {"x", "y"}
    assert model["properties"]["x"]["type"] == "integer"


def test_tool_without_parameters_has_an_object_schema() -> None:
    server = MCPServer("x")

    @server.tool
    async def nothing() -> str:
        return ""

    schema = server.tools["nothing"].definition()["inputSchema"]
    assert schema["type"] == "object"
    assert schema["properties"] == {}
    assert "required" not in schema


async def test_pydantic_argument_is_validated_and_built() -> None:
    server = MCPServer("x")
    server.tool(plot)
    tool = server.tools["plot"]
    good = await tool.call({"label": "p", "point": {"x": 1, "y": 2}, "scale": 2}, None)
    assert good.get("isError") is not True
    assert good["content"] == [{"type": "text", "text": "p 1,2 x2.0 None"}]
    bad = await tool.call({"label": "p", "point": {"x": 1, "y": "north"}}, None)
    assert bad["isError"] is True
    assert "point.y" in bad["content"][0]["text"]
    missing = await tool.call({"point": {"x": 1, "y": 2}}, None)
    assert missing["isError"] is True
    assert "label" in missing["content"][0]["text"]


@pytest.mark.parametrize(
    ("arguments", "where"),
    [
        ({"label": "a\ud800b", "point": {"x": 1, "y": 2}}, "label"),
        ({"label": "é", "point": {"x": 1, "y": 2}, "note": ["ok", "\udfff"]}, "note.1"),
        ({"label": "p", "point": {"x": 1, "y": 2, "\ud83d": 3}}, "point."),
    ],
)
async def test_a_lone_surrogate_never_reaches_a_handler(arguments: dict[str, Any], where: str) -> None:
    """Valid in the request's JSON (the escape), but no text: the handler's ``str`` would fail Django's
    queries on SQLite and PostgreSQL alike; the call is an invalid-arguments result, the handler not run."""
    server = MCPServer("x")
    ran: list[str] = []

    @server.tool
    def record(label: str, point: dict[str, int], note: list[str] | None = None) -> str:
        ran.append(label)
        return label

    result = await server.tools["record"].call(arguments, None)
    assert result["isError"] is True
    text = result["content"][0]["text"]
    assert text.startswith("Invalid arguments for tool record: " + where), text
    assert "unable to parse raw data as a unicode string" in text
    assert ran == []
    fine = await server.tools["record"].call({"label": "é🎉", "point": {"x": 1, "y": 2}, "note": ["ü"]}, None)
    assert fine["content"] == [{"type": "text", "text": "é🎉"}]
    for odd in ([1], {1: "a"}):  # from Python (the schema refuses them on the wire): still a validation error
        assert (await server.tools["record"].call(odd, None))["isError"] is True


async def test_tool_error_becomes_is_error_with_its_message() -> None:
    server = MCPServer("x")

    @server.tool
    def refuse(reason: str) -> str:
        raise ToolError(f"refused: {reason}")

    result = await server.tools["refuse"].call({"reason": "closed"}, None)
    assert result == {"content": [{"type": "text", "text": "refused: closed"}], "isError": True}


# -- prompts: arguments and what a handler may return (unit) ------------------------------------------------


class Reading(BaseModel):
    title: str
    pages: int


@pytest.mark.parametrize(
    ("arguments", "named"),
    [({"count": "many"}, "count"), ({"count": "3", "note": "\ud800"}, "note")],  # a lone surrogate: no text
)
async def test_prompt_arguments_are_validated_with_the_argument_named(
    arguments: dict[str, str], named: str
) -> None:
    server = MCPServer("x")

    @server.prompt
    def chapters(count: int, note: str = "") -> str:
        return f"{count} chapters{note}"

    with pytest.raises(JSONRPCError) as refused:
        await server.prompts["chapters"].render(arguments, None)
    assert refused.value.code == INVALID_PARAMS
    assert refused.value.message.startswith(f"Invalid arguments for prompt chapters: {named}: ")
    assert (await server.prompts["chapters"].render({"count": "3"}, None))["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "3 chapters"}}
    ]


async def test_prompt_messages_from_every_kind_of_return_value() -> None:
    server = MCPServer("x")

    @server.prompt
    def mixed() -> list[Any]:
        return [
            mt.PromptMessage(role="assistant", content=mt.TextContent(type="text", text="typed")),
            {"role": "assistant", "content": {"type": "text", "text": "as a dict"}},
            mt.TextContent(type="text", text="a content block"),
            Reading(title="Dune", pages=412),
            "plain",
        ]

    result = await server.prompts["mixed"].render({}, None)
    assert "description" not in result  # no docstring, no description
    assert result["messages"] == [
        {"role": "assistant", "content": {"type": "text", "text": "typed"}},
        {"role": "assistant", "content": {"type": "text", "text": "as a dict"}},
        {"role": "user", "content": {"type": "text", "text": "a content block"}},
        {"role": "user", "content": {"type": "text", "text": '{"title":"Dune","pages":412}'}},
        {"role": "user", "content": {"type": "text", "text": "plain"}},
    ]


async def test_a_prompt_returning_a_whole_result_is_passed_through() -> None:
    server = MCPServer("x")

    @server.prompt
    def complete() -> mt.GetPromptResult:
        """Described by its docstring, overridden by the result."""
        message = mt.PromptMessage(role="user", content=mt.TextContent(type="text", text="x"))
        return mt.GetPromptResult(description="from the result", messages=[message])

    result = await server.prompts["complete"].render({}, None)
    assert result["description"] == "from the result"
    assert result["messages"] == [{"role": "user", "content": {"type": "text", "text": "x"}}]


# -- resources: definitions, arguments and contents (unit) --------------------------------------------------


def test_a_template_variable_without_a_parameter_is_refused_at_registration() -> None:
    server = MCPServer("x")
    with pytest.raises(TypeError, match=r"res://shelves/\{shelf\}/\{slot\}.*\['slot'\]"):

        @server.resource("res://shelves/{shelf}/{slot}")
        def shelf(shelf: str) -> str:
            return shelf

    assert server.resources == {}


def test_resource_definitions_carry_only_what_was_given() -> None:
    server = MCPServer("x")
    annotations = {"audience": ["user"], "priority": 0.5}
    icons = [{"src": "https://example.org/icon.png", "mimeType": "image/png"}]

    @server.resource("res://sized", size=42, annotations=annotations, icons=icons, meta={"k": "v"})
    def sized() -> str:
        return "s"

    @server.resource("res://sized/{part}", size=42, mime_type="text/csv")
    def part(part: str) -> str:
        return part

    @server.resource("res://bare")
    def bare() -> str:
        return "b"

    assert server.resources["res://sized"].definition() == {
        "name": "sized",
        "uri": "res://sized",
        "size": 42,
        "annotations": annotations,
        "icons": icons,
        "_meta": {"k": "v"},
    }
    # A template has no single size; its MIME type is kept.
    assert server.resources["res://sized/{part}"].definition() == {
        "name": "part",
        "uriTemplate": "res://sized/{part}",
        "mimeType": "text/csv",
    }
    assert server.resources["res://bare"].definition() == {"name": "bare", "uri": "res://bare"}


async def test_a_template_variable_of_the_wrong_type_is_invalid_params() -> None:
    server = MCPServer("x")

    @server.resource("res://books/{book_id}")
    def book(book_id: int) -> str:
        return f"book {book_id}"

    found = server.find_resource("res://books/abc")
    assert found is not None
    entry, variables = found
    with pytest.raises(JSONRPCError) as refused:
        await entry.read("res://books/abc", variables, None)
    assert refused.value.code == INVALID_PARAMS
    assert refused.value.message.startswith("Invalid resource URI res://books/abc: ")
    assert await entry.read("res://books/7", {"book_id": "7"}, None) == {
        "contents": [{"uri": "res://books/7", "mimeType": "text/plain", "text": "book 7"}]
    }


async def test_resource_contents_from_every_kind_of_return_value() -> None:
    server = MCPServer("x")
    text = mt.TextResourceContents(uri="res://other", mime_type="text/markdown", text="# T")
    blob = mt.BlobResourceContents(uri="res://other.bin", mime_type="image/png", blob="AAE=")
    values: dict[str, Any] = {
        "bytes": b"\x00\x01",
        "json": {"shelf": 3, "titles": ["Dune"]},
        "contents": text,
        "several": [text, blob],
        "result": mt.ReadResourceResult(contents=[blob]),
        "empty-list": [],
    }

    @server.resource("res://values/{kind}")
    def value(kind: str) -> Any:
        return values[kind]

    @server.resource("res://typed.bin", mime_type="application/pdf")
    def typed() -> bytes:
        return b"%PDF"

    async def read(uri: str) -> list[dict[str, Any]]:
        found = server.find_resource(uri)
        assert found is not None
        contents: list[dict[str, Any]] = (await found[0].read(uri, found[1], None))["contents"]
        return contents

    as_text = {"uri": "res://other", "mimeType": "text/markdown", "text": "# T"}
    as_blob = {"uri": "res://other.bin", "mimeType": "image/png", "blob": "AAE="}
    assert await read("res://values/bytes") == [
        {"uri": "res://values/bytes", "mimeType": "application/octet-stream", "blob": "AAE="}
    ]
    (as_json,) = await read("res://values/json")
    assert as_json == {"uri": "res://values/json", "mimeType": "application/json", "text": as_json["text"]}
    assert json.loads(as_json["text"]) == values["json"]
    assert await read("res://values/contents") == [as_text]
    assert await read("res://values/several") == [as_text, as_blob]
    assert await read("res://values/result") == [as_blob]
    assert await read("res://values/empty-list") == [
        {"uri": "res://values/empty-list", "mimeType": "application/json", "text": "[]"}
    ]
    assert await read("res://typed.bin") == [
        {"uri": "res://typed.bin", "mimeType": "application/pdf", "blob": "JVBERg=="}
    ]


# -- the server: lookups, completions, removal at run time (unit) -------------------------------------------


def test_find_resource_prefers_a_fixed_uri_and_knows_unknown_ones() -> None:
    server = MCPServer("x")

    @server.resource("res://items/{item_id}")
    def item(item_id: str) -> str:
        return item_id

    @server.resource("res://items/special")
    def special() -> str:
        return "special"

    fixed = server.find_resource("res://items/special")
    assert fixed is not None
    assert (fixed[0].fn, fixed[1]) == (special, {})
    templated = server.find_resource("res://items/7")
    assert templated is not None
    assert (templated[0].fn, templated[1]) == (item, {"item_id": "7"})
    assert server.find_resource("res://items/7/more") is None
    assert server.find_resource("res://elsewhere") is None


@pytest.mark.parametrize("refs", [{}, {"prompt": "p", "resource": "res://r/{x}"}])
def test_a_completion_names_exactly_one_prompt_or_resource(refs: dict[str, str]) -> None:
    with pytest.raises(ImproperlyConfigured, match="exactly one of prompt= or resource="):
        MCPServer("x").completion(**refs)


def test_removing_handlers_tells_the_listeners_which_list_changed() -> None:
    server = MCPServer("x")
    changes: list[str] = []

    @server.tool
    def tool() -> str:
        return ""

    @server.resource("res://r")
    def resource() -> str:
        return ""

    @server.prompt
    def prompt() -> str:
        return ""

    server.on_change(changes.append)
    server.remove_tool("tool")
    server.remove_resource("res://r")
    server.remove_prompt("prompt")
    assert changes == ["tools", "resources", "prompts"]
    assert (server.tools, server.resources, server.prompts) == ({}, {}, {})
    with pytest.raises(KeyError):
        server.remove_tool("tool")
    assert changes == ["tools", "resources", "prompts"]


def test_icons_and_meta_are_listed_when_given() -> None:
    server = MCPServer("x")
    icons = [{"src": "https://example.org/t.svg", "mimeType": "image/svg+xml", "sizes": ["any"]}]

    @server.tool(icons=icons, meta={"example.org/tier": "gold"})
    def decorated() -> str:
        return ""

    @server.prompt(icons=icons)
    def pictured() -> str:
        return ""

    tool = server.tools["decorated"].definition()
    assert (tool["icons"], tool["_meta"]) == (icons, {"example.org/tier": "gold"})
    prompt = server.prompts["pictured"].definition()
    assert prompt["icons"] == icons
    assert "_meta" not in prompt
