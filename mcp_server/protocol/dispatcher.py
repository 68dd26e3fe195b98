"""Routes a request through its server's one table of methods: the built-in MCP methods and the site's raw
methods."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from mcp_types.methods import validate_client_request
from pydantic import ValidationError

from ..conf import mcp_settings
from ..core.context import LOG_LEVELS, Context, MethodHandler
from ..core.stores import bounded
from ..registry.access import REQUIRED_SCOPE_KEY, ausable, listed_entries
from ..registry.server import MCPServer, check_method_name, server_of
from ..registry.signature import call_handler
from ..wire.errors import INVALID_PARAMS, METHOD_NOT_FOUND, JSONRPCError, ResourceNotFound
from ..wire.jsonrpc import lone_surrogate_at
from ..wire.shapes import is_plain_call_params, shaped_result
from ..wire.v2026_07_28 import BUILTIN_METHODS, TASK_METHODS
from .listen import listen
from .pagination import paginate
from .task_methods import tasks_cancel, tasks_get, tasks_update
from .tasks import call_tool
from .v2026_07_28 import discover_result, finish_result

if TYPE_CHECKING:
    from ..registry.entries import RegisteredHandler

__all__ = ["BUILTINS", "dispatch", "handler_table"]


Listed = list[tuple["RegisteredHandler", list[str] | None]]


async def _visible(entries: list[RegisteredHandler], ctx: Context) -> Listed:
    return await listed_entries(entries, ctx)


def _definition(entry: RegisteredHandler, missing: list[str] | None) -> dict[str, Any]:
    """The entry as listed; one the token's scopes do not reach names the scope to step up to."""
    out: dict[str, Any] = entry.definition()  # type: ignore[attr-defined]
    if missing:
        out["_meta"] = {**(out.get("_meta") or {}), REQUIRED_SCOPE_KEY: " ".join(missing)}
    return out


def _page(ctx: Context, key: str, entries: Listed) -> dict[str, Any]:
    page, next_cursor = paginate(entries, ctx.params.get("cursor"), mcp_settings.PAGE_SIZE)
    result: dict[str, Any] = {key: [_definition(e, missing) for e, missing in page]}
    if next_cursor:
        result["nextCursor"] = next_cursor
    return result


async def _ping(ctx: Context) -> dict[str, Any]:
    return {}


async def _discover(ctx: Context) -> dict[str, Any]:
    return discover_result(server_of(ctx))


async def _tools_list(ctx: Context) -> dict[str, Any]:
    tools = server_of(ctx).tools.values()
    if not ctx.client_supports_apps:  # no view can call them: the model would see tools meant for views
        return _page(ctx, "tools", await _visible([t for t in tools if not t.app_only], ctx))
    return _page(ctx, "tools", await _visible(list(tools), ctx))


async def _tools_call(ctx: Context) -> dict[str, Any]:
    name = ctx.params["name"]
    tool = server_of(ctx).tools.get(name)
    if tool is None or not await ausable(tool, ctx):
        raise JSONRPCError(INVALID_PARAMS, f"Unknown tool: {name}")
    return await call_tool(ctx, tool)


async def _resources_list(ctx: Context) -> dict[str, Any]:
    fixed = [r for r in server_of(ctx).resources.values() if not r.is_template]
    return _page(ctx, "resources", await _visible(list(fixed), ctx))


async def _resource_templates_list(ctx: Context) -> dict[str, Any]:
    templates = [r for r in server_of(ctx).resources.values() if r.is_template]
    return _page(ctx, "resourceTemplates", await _visible(list(templates), ctx))


async def _resources_read(ctx: Context) -> dict[str, Any]:
    uri = ctx.params["uri"]
    found = server_of(ctx).find_resource(uri)
    if found is None or not await ausable(found[0], ctx):
        if ctx.sessionless:  # 2026-07-28: -32602 (-32002 is the handshake era's)
            raise JSONRPCError(INVALID_PARAMS, f"Resource not found: {uri}", {"uri": uri})
        raise ResourceNotFound(uri)
    resource, variables = found
    return await resource.read(uri, variables, ctx)


async def _subscribe(ctx: Context) -> dict[str, Any]:
    from ..sessions import asubscribe

    found = server_of(ctx).find_resource(ctx.params["uri"])
    if found is None or not await ausable(found[0], ctx):
        raise ResourceNotFound(ctx.params["uri"])
    subscribed = ctx.method == "resources/subscribe"
    await bounded(asubscribe(ctx.session, ctx.params["uri"], subscribed=subscribed), "session store")
    return {}


async def _prompts_list(ctx: Context) -> dict[str, Any]:
    return _page(ctx, "prompts", await _visible(list(server_of(ctx).prompts.values()), ctx))


async def _prompts_get(ctx: Context) -> dict[str, Any]:
    name = ctx.params["name"]
    prompt = server_of(ctx).prompts.get(name)
    if prompt is None or not await ausable(prompt, ctx):
        raise JSONRPCError(INVALID_PARAMS, f"Unknown prompt: {name}")
    return await prompt.render(ctx.params.get("arguments"), ctx)


async def _set_level(ctx: Context) -> dict[str, Any]:
    from ..sessions import aset_log_level

    level = ctx.params["level"]
    if level not in LOG_LEVELS:
        raise JSONRPCError(INVALID_PARAMS, f"Unknown log level: {level}")
    await bounded(aset_log_level(ctx.session, level), "session store")
    return {}


def _refuse_unreadable(text: dict[str, Any]) -> None:
    """-32602 when what a completion handler gets holds a lone UTF-16 surrogate (no text: as for a tool's
    arguments, the site's code never sees one)."""
    where = lone_surrogate_at(text)
    if where is not None:
        path = ".".join(str(part) for part in where)
        raise JSONRPCError(
            INVALID_PARAMS, f"Invalid params for completion/complete: params.{path}: a lone UTF-16 surrogate"
        )


async def _complete(ctx: Context) -> dict[str, Any]:
    ref = ctx.params["ref"]
    key = f"{ref['type']}:{ref.get('name') or ref.get('uri')}"
    server = server_of(ctx)
    handler = server.completions.get(key)
    target = (
        server.prompts.get(str(ref.get("name")))
        if ref["type"] == "ref/prompt"
        else server.resources.get(str(ref.get("uri")))
    )
    if target is not None and not await ausable(target, ctx):
        handler = None
    argument = ctx.params["argument"]
    values: Any = []
    if handler is not None:
        context_arguments = (ctx.params.get("context") or {}).get("arguments") or {}
        _refuse_unreadable({"argument": argument, "context": {"arguments": context_arguments}})
        values = await call_handler(handler, argument["name"], argument["value"], context_arguments)
    if isinstance(values, dict):
        return {"completion": values}
    values = [str(v) for v in values or []]
    return {"completion": {"values": values[:100], "total": len(values), "hasMore": len(values) > 100}}


def _validate(ctx: Context) -> None:
    if ctx.method in TASK_METHODS:  # the extension's methods: checked by their handlers (protocol.tasks)
        if not ctx.sessionless:
            raise JSONRPCError(METHOD_NOT_FOUND, f"Method not found: {ctx.method}")
        return
    params = ctx.params or None
    version = ctx.session.protocol_version
    if ctx.method == "tools/call" and params is not None and is_plain_call_params(params, version):
        return
    if ctx.rounds is not None and params is not None:  # answers are checked by the ask they answer (rounds)
        params = {k: v for k, v in params.items() if k != "inputResponses"}
    try:
        validate_client_request(ctx.method, ctx.session.protocol_version, params)
    except KeyError as exc:
        raise JSONRPCError(
            METHOD_NOT_FOUND, f"Method not found: {ctx.method} (protocol {ctx.session.protocol_version})"
        ) from exc
    except ValidationError as exc:
        detail = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise JSONRPCError(INVALID_PARAMS, f"Invalid params for {ctx.method}: {detail}") from exc


def _builtin(run: Callable[[Context], Awaitable[dict[str, Any]]]) -> MethodHandler:
    """A built-in method as the table holds it: its params checked against the revision's schema first, its
    result shaped for the revision after."""

    async def handle(ctx: Context) -> dict[str, Any]:
        _validate(ctx)
        result = await run(ctx)
        if ctx.sessionless:
            return finish_result(ctx, result)
        return shaped_result(ctx.method, ctx.session.protocol_version, result)

    return handle


def _raw(method: str, func: Callable[..., Any]) -> MethodHandler:
    """A site's raw method (``@mcp.method``) as the table holds it: called as ``func(params)`` or
    ``func(params, ctx)``, by its signature (read once, here); its result must be an object or ``None``."""
    takes_context = len(inspect.signature(func).parameters) > 1

    async def handle(ctx: Context) -> dict[str, Any] | None:
        if takes_context:
            value = await call_handler(func, ctx.params, ctx)
        else:
            value = await call_handler(func, ctx.params)
        if value is not None and not isinstance(value, dict):
            raise JSONRPCError(-32603, f"Method {method} returned {type(value).__name__}, not an object")
        return finish_result(ctx, value) if value is not None and ctx.sessionless else value

    return handle


BUILTINS: Mapping[str, MethodHandler] = MappingProxyType(
    {
        "ping": _builtin(_ping),
        "tools/list": _builtin(_tools_list),
        "tools/call": _builtin(_tools_call),
        "resources/list": _builtin(_resources_list),
        "resources/templates/list": _builtin(_resource_templates_list),
        "resources/read": _builtin(_resources_read),
        "resources/subscribe": _builtin(_subscribe),
        "resources/unsubscribe": _builtin(_subscribe),
        "prompts/list": _builtin(_prompts_list),
        "prompts/get": _builtin(_prompts_get),
        "logging/setLevel": _builtin(_set_level),
        "completion/complete": _builtin(_complete),
        "server/discover": _builtin(_discover),
        "subscriptions/listen": _builtin(listen),
        "tasks/get": _builtin(tasks_get),
        "tasks/update": _builtin(tasks_update),
        "tasks/cancel": _builtin(tasks_cancel),
    }
)
"""The methods every server answers, as they enter each server's table (:func:`handler_table`)."""
# One source for the built-in methods: ``wire.v2026_07_28.BUILTIN_METHODS``, which the registry refuses to a
# site's ``@mcp.method`` as it is registered (``MCPServer.method``), is exactly what this table answers, with
# ``initialize`` (answered before dispatch, by protocol.serving). Checked at import, even under ``python -O``.
if BUILTINS.keys() | {"initialize"} != BUILTIN_METHODS:  # pragma: no cover - a bug of this package
    raise RuntimeError(f"BUILTINS and BUILTIN_METHODS differ: {BUILTINS.keys() ^ BUILTIN_METHODS}")


def handler_table(server: MCPServer) -> Mapping[str, MethodHandler]:
    """Every method ``server`` answers in one table, as the official SDK's low-level server keeps its request
    handlers: the built-in ones first, then the site's raw methods, none of which may take a built-in's name
    (``ImproperlyConfigured``; the registry refuses one as it is registered, and a method put straight into
    ``server.methods`` is refused here). Built once per server and kept on it until a method is
    registered; the app checks every server's at start-up."""
    table = server.handler_table
    if table is None:
        table = dict(BUILTINS)
        for name, func in server.methods.items():
            check_method_name(name)
            table[name] = _raw(name, func)
        server.handler_table = table
    return table


async def dispatch(ctx: Context) -> dict[str, Any] | None:
    """Run the method ``ctx`` names, looked up in its server's one table, and return its result (``None``
    only from a raw method)."""
    handler = handler_table(server_of(ctx)).get(ctx.method)
    if handler is None:
        raise JSONRPCError(METHOD_NOT_FOUND, f"Method not found: {ctx.method}")
    return await handler(ctx)
