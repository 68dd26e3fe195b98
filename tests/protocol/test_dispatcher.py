"""The dispatcher in process: each built-in method and raw methods, called with a real :class:`Context`.

A server of this module's own (tools, fixed and template resources, prompts, completions, raw methods,
some hidden by a permission) is dispatched to directly, so every branch of ``dispatcher.py`` is pinned
down: what is listed, found, refused, paginated and completed, and which JSON-RPC error each refusal is.
The same methods over real servers are in ``test_features.py`` and ``test_registry.py``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.utils import timezone

from mcp_server import JSONRPCError
from mcp_server.core.context import Context, SessionState
from mcp_server.models import Session
from mcp_server.protocol.dispatcher import dispatch
from mcp_server.registry.server import MCPServer
from tests.support.peers import RecordingPeer

VERSION = "2025-11-25"
server = MCPServer("dispatcher-units")


def deny(user: Any) -> bool:
    """A permission nobody has."""
    return False


@server.tool
async def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


@server.tool
async def whisper(text: str) -> str:
    """Lower-case the text."""
    return text.lower()


@server.tool(permission=deny)
async def hidden() -> str:
    """Nobody may call this."""
    return "secret"


@server.resource("units://fixed")
async def fixed() -> str:
    return "fixed text"


@server.resource("units://item/{id}")
async def item(id: str) -> str:
    return f"item {id}"


@server.resource("units://secret", permission=deny)
async def secret() -> str:
    return "secret text"


@server.resource("units://vault/{id}", permission=deny)
async def vault(id: str) -> str:
    return f"vault {id}"


@server.prompt
async def greet(name: str) -> str:
    """Greet someone."""
    return f"Hello {name}"


@server.prompt
async def plain() -> str:
    """A prompt without completions."""
    return "plain"


@server.prompt(permission=deny)
async def confidential(topic: str) -> str:
    """Nobody may see this."""
    return f"about {topic}"


@server.completion(prompt="greet")
def complete_greet(argument: str, value: str, context_arguments: dict[str, str]) -> Any:
    """``count`` values from the context arguments; ``dict`` and ``none`` return those shapes."""
    if value == "dict":
        return {"values": ["from a dict"], "total": 7, "hasMore": True}
    if value == "none":
        return None
    count = int(context_arguments.get("count", "3"))
    return [f"{argument}-{value}-{n}" for n in range(count)]


@server.completion(resource="units://item/{id}")
def complete_item(argument: str, value: str, context_arguments: dict[str, str]) -> list[int]:
    return [1, 2]


@server.completion(prompt="confidential")
def complete_confidential(argument: str, value: str, context_arguments: dict[str, str]) -> list[str]:
    return ["leak"]


@server.completion(resource="units://vault/{id}")
def complete_vault(argument: str, value: str, context_arguments: dict[str, str]) -> list[str]:
    return ["leak"]


@server.method("units/params")
async def params_only(params: dict[str, Any]) -> dict[str, Any]:
    return {"got": params}


@server.method("units/context")
async def with_context(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    return {"method": ctx.method, "id": ctx.request_id, "got": params}


@server.method("units/none")
async def returns_none(params: dict[str, Any]) -> dict[str, Any] | None:
    return None


@server.method("units/list")
async def returns_list(params: dict[str, Any]) -> Any:
    return [1, 2]


def decoded(value: Any) -> Any:
    """``value`` as it arrives from the wire: fresh objects, never the interned literals of this module."""
    return json.loads(json.dumps(value))


def context(
    method: str, params: dict[str, Any] | None = None, *, session: SessionState | None = None
) -> Context:
    return Context(
        server=server,
        session=session or SessionState(id=None, protocol_version=VERSION),
        request_id=3,
        method=decoded(method),
        params=decoded(params or {}),
        peer=RecordingPeer(),
    )


async def call(method: str, params: dict[str, Any] | None = None, **kwargs: Any) -> dict[str, Any]:
    result = await dispatch(context(method, params, **kwargs))
    assert result is not None
    return result


async def refused(method: str, params: dict[str, Any] | None = None, **kwargs: Any) -> JSONRPCError:
    with pytest.raises(JSONRPCError) as caught:
        await dispatch(context(method, params, **kwargs))
    return caught.value


# -- validation --------------------------------------------------------------------------------------------


async def test_ping_answers_an_empty_result() -> None:
    assert await call("ping") == {}


async def test_a_builtin_unknown_to_the_sessions_protocol_is_method_not_found() -> None:
    session = SessionState(id=None, protocol_version="2026-07-28")
    error = await refused("ping", session=session)
    assert (error.code, error.message) == (-32601, "Method not found: ping (protocol 2026-07-28)")


async def test_invalid_params_are_minus_32602() -> None:
    error = await refused("tools/call", {"arguments": {}})
    assert (error.code, error.message) == (
        -32602,
        "Invalid params for tools/call: params.name: Field required",
    )


# -- tools ---------------------------------------------------------------------------------------------------


async def test_tools_call_runs_the_tool() -> None:
    result = await call("tools/call", {"name": "shout", "arguments": {"text": "hi"}})
    assert result["content"] == [{"type": "text", "text": "HI"}]
    assert not result.get("isError")


@pytest.mark.parametrize("name", ["nope", "hidden"])
async def test_an_unknown_or_forbidden_tool_is_invalid_params(name: str) -> None:
    error = await refused("tools/call", {"name": name, "arguments": {}})
    assert (error.code, error.message) == (-32602, f"Unknown tool: {name}")


async def test_tools_list_pages_through_the_visible_tools(settings: Any) -> None:
    settings.MCP_SERVER = {**settings.MCP_SERVER, "PAGE_SIZE": 1}
    first = await call("tools/list")
    assert [t["name"] for t in first["tools"]] == ["shout"]
    second = await call("tools/list", {"cursor": first["nextCursor"]})
    assert [t["name"] for t in second["tools"]] == ["whisper"]
    assert "nextCursor" not in second


async def test_a_single_page_has_no_cursor() -> None:
    result = await call("tools/list")
    assert [t["name"] for t in result["tools"]] == ["shout", "whisper"]
    assert "nextCursor" not in result


# -- resources -----------------------------------------------------------------------------------------------


async def test_resources_and_templates_are_listed_apart() -> None:
    resources = await call("resources/list")
    assert [r["uri"] for r in resources["resources"]] == ["units://fixed"]
    templates = await call("resources/templates/list")
    assert [r["uriTemplate"] for r in templates["resourceTemplates"]] == ["units://item/{id}"]


@pytest.mark.parametrize(("uri", "text"), [("units://fixed", "fixed text"), ("units://item/5", "item 5")])
async def test_resources_read_serves_fixed_and_template_uris(uri: str, text: str) -> None:
    result = await call("resources/read", {"uri": uri})
    assert [(c["uri"], c["text"]) for c in result["contents"]] == [(uri, text)]


@pytest.mark.parametrize("uri", ["units://nowhere", "units://secret", "units://vault/1"])
async def test_an_unknown_or_forbidden_resource_is_not_found(uri: str) -> None:
    error = await refused("resources/read", {"uri": uri})
    assert (error.code, error.data) == (-32002, {"uri": uri})


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("uri", ["units://fixed", "units://item/9"])
async def test_subscribe_then_unsubscribe(uri: str) -> None:
    row = await Session.objects.acreate(
        id=f"s-dispatch-{uri[-1]}", protocol_version=VERSION, last_seen=timezone.now()
    )
    session = SessionState(id=row.id, protocol_version=VERSION)
    assert await call("resources/subscribe", {"uri": uri}, session=session) == {}
    await row.arefresh_from_db()
    assert row.subscriptions == [uri]
    assert await call("resources/unsubscribe", {"uri": uri}, session=session) == {}
    await row.arefresh_from_db()
    assert row.subscriptions == []


@pytest.mark.parametrize("method", ["resources/subscribe", "resources/unsubscribe"])
@pytest.mark.parametrize("uri", ["units://nowhere", "units://secret", "units://vault/1"])
async def test_subscribing_to_an_unknown_or_forbidden_resource_is_not_found(method: str, uri: str) -> None:
    error = await refused(method, {"uri": uri})
    assert (error.code, error.data) == (-32002, {"uri": uri})


# -- prompts and logging -------------------------------------------------------------------------------------


async def test_prompts_get_renders_the_prompt() -> None:
    result = await call("prompts/get", {"name": "greet", "arguments": {"name": "Ada"}})
    assert result["messages"] == [{"role": "user", "content": {"type": "text", "text": "Hello Ada"}}]
    listed = await call("prompts/list")
    assert [p["name"] for p in listed["prompts"]] == ["greet", "plain"]


@pytest.mark.parametrize("name", ["nope", "confidential"])
async def test_an_unknown_or_forbidden_prompt_is_invalid_params(name: str) -> None:
    error = await refused("prompts/get", {"name": name, "arguments": {"topic": "x"}})
    assert (error.code, error.message) == (-32602, f"Unknown prompt: {name}")


async def test_set_level_is_kept_for_the_session() -> None:
    session = SessionState(id=None, protocol_version=VERSION)
    assert await call("logging/setLevel", {"level": "warning"}, session=session) == {}
    assert session.log_level == "warning"


async def test_an_unknown_level_is_invalid_params() -> None:
    session = SessionState(id=None, protocol_version=VERSION)
    error = await refused("logging/setLevel", {"level": "loud"}, session=session)
    assert error.code == -32602
    assert session.log_level is None


# -- completion ----------------------------------------------------------------------------------------------


def prompt_ref(name: str, value: str, context_arguments: dict[str, str] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {
        "ref": {"type": "ref/prompt", "name": name},
        "argument": {"name": "name", "value": value},
    }
    if context_arguments is not None:
        params["context"] = {"arguments": context_arguments}
    return params


async def test_completion_values_come_from_the_handler_with_the_context_arguments() -> None:
    result = await call("completion/complete", prompt_ref("greet", "a", {"count": "2"}))
    assert result["completion"] == {"values": ["name-a-0", "name-a-1"], "total": 2, "hasMore": False}


async def test_completion_without_context_uses_the_handlers_default() -> None:
    result = await call("completion/complete", prompt_ref("greet", "b"))
    assert result["completion"]["values"] == ["name-b-0", "name-b-1", "name-b-2"]
    assert result["completion"]["hasMore"] is False


@pytest.mark.parametrize(("count", "kept", "more"), [(100, 100, False), (101, 100, True)])
async def test_completion_keeps_100_values(count: int, kept: int, more: bool) -> None:
    result = await call("completion/complete", prompt_ref("greet", "c", {"count": str(count)}))
    completion = result["completion"]
    assert completion["values"] == [f"name-c-{n}" for n in range(kept)]
    assert (completion["total"], completion["hasMore"]) == (count, more)


@pytest.mark.parametrize(
    ("params", "where"),
    [
        (prompt_ref("greet", "a\ud800"), "params.argument.value"),
        (prompt_ref("greet", "a", {"count": "\udfff"}), "params.context.arguments.count"),
    ],
)
async def test_a_lone_surrogate_never_reaches_a_completion_handler(
    params: dict[str, Any], where: str
) -> None:
    """No text (a JSON escape only): as for a tool's arguments, the site's code never sees one."""
    error = await refused("completion/complete", params)
    assert error.code == -32602
    assert error.message == f"Invalid params for completion/complete: {where}: a lone UTF-16 surrogate"


async def test_a_completion_dict_is_passed_through() -> None:
    result = await call("completion/complete", prompt_ref("greet", "dict"))
    assert result["completion"] == {"values": ["from a dict"], "total": 7, "hasMore": True}


async def test_a_handler_returning_nothing_completes_to_nothing() -> None:
    result = await call("completion/complete", prompt_ref("greet", "none"))
    assert result["completion"] == {"values": [], "total": 0, "hasMore": False}


async def test_a_resource_template_completes_from_its_handler() -> None:
    params = {
        "ref": {"type": "ref/resource", "uri": "units://item/{id}"},
        "argument": {"name": "id", "value": ""},
    }
    result = await call("completion/complete", params)
    assert result["completion"] == {"values": ["1", "2"], "total": 2, "hasMore": False}


@pytest.mark.parametrize(
    "ref",
    [
        {"type": "ref/prompt", "name": "plain"},
        {"type": "ref/prompt", "name": "confidential"},
        {"type": "ref/resource", "uri": "units://vault/{id}"},
        {"type": "ref/resource", "uri": "units://nowhere/{id}"},
    ],
)
async def test_no_handler_or_a_forbidden_target_completes_to_nothing(ref: dict[str, str]) -> None:
    result = await call("completion/complete", {"ref": ref, "argument": {"name": "id", "value": "x"}})
    assert result["completion"] == {"values": [], "total": 0, "hasMore": False}


# -- raw methods ---------------------------------------------------------------------------------------------


async def test_a_raw_method_taking_params_only_gets_the_params() -> None:
    assert await call("units/params", {"a": 1}) == {"got": {"a": 1}}


async def test_a_raw_method_taking_the_context_gets_it() -> None:
    assert await call("units/context", {"b": 2}) == {"method": "units/context", "id": 3, "got": {"b": 2}}


async def test_a_raw_method_returning_nothing_hands_none_to_the_guarantee() -> None:
    assert await dispatch(context("units/none")) is None


async def test_a_raw_method_returning_a_non_object_is_an_internal_error() -> None:
    error = await refused("units/list")
    assert (error.code, error.message) == (-32603, "Method units/list returned list, not an object")


async def test_an_unknown_method_is_method_not_found() -> None:
    error = await refused("units/nope")
    assert (error.code, error.message) == (-32601, "Method not found: units/nope")


def test_the_dispatcher_answers_exactly_the_methods_the_registry_refuses() -> None:
    """One list of built-in methods (``BUILTIN_METHODS``): the registry refuses each to ``@mcp.method`` and
    the dispatcher answers each itself, the 2026-07-28 ones and the tasks extension's included; a method
    in neither is a site's own (``tests/registry/test_registry.py``, ``tests/test_apps.py``)."""
    from mcp_server.protocol.dispatcher import BUILTINS
    from mcp_server.wire.v2026_07_28 import BUILTIN_METHODS, TASK_METHODS

    assert BUILTINS.keys() | {"initialize"} == BUILTIN_METHODS
    assert {"server/discover", "subscriptions/listen", *TASK_METHODS} <= BUILTINS.keys()
    assert "tasks/list" not in BUILTIN_METHODS  # removed from the extension: a site may define it


def test_built_in_and_raw_methods_are_one_table() -> None:
    """The server's table holds every method it answers: each built-in as the dispatcher's own, each raw
    method beside them; the one lookup of a request is in it."""
    from mcp_server.protocol.dispatcher import BUILTINS, handler_table

    table = handler_table(server)
    assert table.keys() == BUILTINS.keys() | server.methods.keys()
    assert all(table[name] is BUILTINS[name] for name in BUILTINS)
    assert {"units/params", "units/context", "units/list"} <= table.keys()
    assert handler_table(server) is table  # built once, kept on the server


async def test_a_method_registered_later_enters_the_table() -> None:
    from mcp_server.protocol.dispatcher import handler_table

    late = MCPServer("late-methods")
    before = handler_table(late)
    assert "late/hello" not in before

    @late.method("late/hello")
    def hello(params: dict[str, Any]) -> dict[str, Any]:
        return {"hello": params.get("name")}

    assert "late/hello" in handler_table(late)
    ctx = Context(
        server=late,
        session=SessionState(id=None, protocol_version=VERSION),
        request_id=1,
        method="late/hello",
        params={"name": "Ada"},
        peer=RecordingPeer(),
    )
    assert await dispatch(ctx) == {"hello": "Ada"}


@pytest.mark.parametrize("name", ["tasks/get", "tools/call", "notifications/cancelled"])
def test_a_method_put_straight_into_the_registry_under_a_built_ins_name_is_refused_at_start_up(
    name: str,
) -> None:
    """Past the registry's own refusal (``server.methods[name] = ...``), the table refuses it when it is
    built: at start-up, by the app for the default server and by ``mcp_endpoint`` for each routed one."""
    from django.core.exceptions import ImproperlyConfigured

    from mcp_server.protocol.dispatcher import handler_table
    from mcp_server.routing import mcp_endpoint

    rogue = MCPServer("rogue-methods")
    rogue.methods[name] = lambda params: {}
    message = f"MCP method {name!r} is built in and cannot be overridden"
    with pytest.raises(ImproperlyConfigured) as caught:
        handler_table(rogue)
    assert str(caught.value) == message
    with pytest.raises(ImproperlyConfigured, match="built in"):
        mcp_endpoint(rogue)
