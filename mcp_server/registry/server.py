"""``MCPServer``: the registry users decorate, and ``mcp``, the default one (as ``admin.site`` is)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar, overload

from django.core.exceptions import ImproperlyConfigured

from ..conf import mcp_settings
from ..core.context import Context, MethodHandler
from ..wire.v2026_07_28 import BUILTIN_METHODS
from .apps import App, AppResource
from .entries import Permission
from .prompts import Prompt
from .resources import Resource
from .tools import Tool

__all__ = ["MCPServer", "check_method_name", "mcp", "server_of"]

F = TypeVar("F", bound=Callable[..., Any])
ChangeListener = Callable[[str], None]


def check_method_name(name: str) -> None:
    """``ImproperlyConfigured`` for a raw method named as a built-in one (``BUILTIN_METHODS``) or as a
    notification: the one rule, applied as ``@mcp.method`` registers and as the dispatcher builds a server's
    table of methods."""
    if name in BUILTIN_METHODS or name.startswith("notifications/"):
        raise ImproperlyConfigured(f"MCP method {name!r} is built in and cannot be overridden")


class MCPServer:
    """A set of tools, resources, prompts and raw methods served at one endpoint.

    ``name`` is what clients see (``serverInfo.name``; default: the ``SERVER_NAME`` setting), as in the
    official SDK's ``MCPServer("library")``. ``key`` identifies the server among the site's servers: its
    sessions belong to it alone, so each routed server needs its own (default: ``name``, else
    ``"default"``). ``title``, ``version``, ``instructions`` and ``icons`` override the ``SERVER_TITLE``,
    ``SERVER_VERSION``, ``INSTRUCTIONS`` and ``SERVER_ICONS`` settings in this server's ``initialize`` answer.
    """

    def __init__(
        self,
        name: str | None = None,
        *,
        key: str | None = None,
        title: str | None = None,
        version: str | None = None,
        instructions: str | None = None,
        icons: list[dict[str, Any]] | None = None,
    ) -> None:
        self.name = name
        self.icons = icons
        self.key = key or name or "default"
        self.title = title
        self.version = version
        self.instructions = instructions
        self.tools: dict[str, Tool] = {}
        self.resources: dict[str, Resource] = {}
        self.prompts: dict[str, Prompt] = {}
        self.methods: dict[str, Callable[..., Any]] = {}
        """A site's raw methods (``@mcp.method``), as registered."""
        self.handler_table: dict[str, MethodHandler] | None = None
        """Every method this server answers, the built-in ones and :attr:`methods`, in one table: built by
        the protocol layer (``protocol.dispatcher.handler_table``) on first use, dropped when a method is
        registered."""
        self.completions: dict[str, Callable[..., Any]] = {}
        self._listeners: list[ChangeListener] = []
        self.watched = False
        """Whether run-time changes are announced to sessions (see ``mcp_server.updates.watch_registry``)."""
        self.notifying: set[asyncio.Task[int]] = set()
        """The background tasks sending this server's ``list_changed`` notifications right now."""

    def __repr__(self) -> str:
        return f"<MCPServer {self.key!r}>"

    # -- registration -------------------------------------------------------------------------

    @overload
    def tool(self, fn: F, /) -> F: ...
    @overload
    def tool(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: dict[str, Any] | None = None,
        permission: Permission = None,
        timeout: float | None = None,
        structured_output: bool | None = None,
        meta: dict[str, Any] | None = None,
        icons: list[dict[str, Any]] | None = None,
        input_schema: dict[str, Any] | None = None,
        output_schema: dict[str, Any] | None = None,
        task: str | None = None,
        task_start: str = "immediate",
        app: str | App | None = None,
        visibility: list[str] | None = None,
    ) -> Callable[[F], F]: ...
    def tool(self, fn: F | None = None, /, **options: Any) -> F | Callable[[F], F]:
        """Register a tool; usable as ``@mcp.tool`` or ``@mcp.tool(name=..., permission=...)``.

        ``input_schema`` replaces the schema derived from the signature in ``tools/list`` (for JSON Schema
        the signature cannot express); arguments are still validated against the signature, except those a
        ``**kwargs`` parameter takes (allowed only with ``input_schema``: the handler validates them).
        ``output_schema`` (an object schema) replaces the one derived from the return annotation.

        ``task="optional"`` or ``"required"`` lets a 2026-07-28 call that declares the tasks extension be
        answered with a task (``tasks/get`` polls it from any worker); ``task_start="detach"`` runs the
        handler inside the call until it awaits ``ctx.detach()`` (input asked before that is answered as
        ``input_required`` rounds of the call itself).

        MCP Apps: ``app="catalogue/book_cards.html"`` (a template name, or an :class:`~.apps.App`) shows the
        result in that template's view (``_meta.ui.resourceUri``; its ``ui://`` resource is registered once
        per view); ``visibility=["app"]`` makes a tool for views only (not listed to the model).
        """

        def register(func: F) -> F:
            app = options.pop("app", None)
            if app is not None:
                options["ui_resource"] = self._add_app(app if isinstance(app, App) else App(app))
            entry = Tool(name=options.pop("name", None) or func.__name__, fn=func, **options)
            self._add(self.tools, entry.name, entry, "tool", "tools")
            return func

        return register(fn) if fn is not None else register

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        size: int | None = None,
        annotations: dict[str, Any] | None = None,
        permission: Permission = None,
        meta: dict[str, Any] | None = None,
        icons: list[dict[str, Any]] | None = None,
        ttl_ms: int | None = None,
        cache_scope: str | None = None,
    ) -> Callable[[F], F]:
        """Register a resource at ``uri``; ``{name}`` parts make it a template filled from the arguments.

        ``ttl_ms`` and ``cache_scope`` override ``CACHE_HINTS`` for its ``resources/read`` at 2026-07-28."""

        def register(func: F) -> F:
            entry = Resource(
                name=name or func.__name__,
                fn=func,
                uri=uri,
                title=title,
                description=description,
                mime_type=mime_type,
                size=size,
                annotations=annotations,
                permission=permission,
                meta=meta,
                icons=icons,
                ttl_ms=ttl_ms,
                cache_scope=cache_scope,
            )
            self._add(self.resources, uri, entry, "resource", "resources")
            return func

        return register

    @overload
    def prompt(self, fn: F, /) -> F: ...
    @overload
    def prompt(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        permission: Permission = None,
        meta: dict[str, Any] | None = None,
        icons: list[dict[str, Any]] | None = None,
    ) -> Callable[[F], F]: ...
    def prompt(self, fn: F | None = None, /, **options: Any) -> F | Callable[[F], F]:
        """Register a prompt; usable with or without arguments."""

        def register(func: F) -> F:
            entry = Prompt(name=options.pop("name", None) or func.__name__, fn=func, **options)
            self._add(self.prompts, entry.name, entry, "prompt", "prompts")
            return func

        return register(fn) if fn is not None else register

    def method(self, name: str) -> Callable[[F], F]:
        """Register a raw JSON-RPC method: ``handler(params: dict, ctx)`` returns the result dict."""
        check_method_name(name)

        def register(func: F) -> F:
            self._add(self.methods, name, func, "method", None)
            return func

        return register

    def completion(self, *, prompt: str | None = None, resource: str | None = None) -> Callable[[F], F]:
        """Register completions for a prompt's arguments or a resource template's variables.

        The handler is called as ``handler(argument, value, context_arguments)`` and returns a list of
        strings (or a ``Completion`` dict).
        """
        if (prompt is None) == (resource is None):
            raise ImproperlyConfigured("completion() takes exactly one of prompt= or resource=")
        key = ("ref/prompt", prompt) if prompt is not None else ("ref/resource", str(resource))

        def register(func: F) -> F:
            self._add(self.completions, f"{key[0]}:{key[1]}", func, "completion", None)
            return func

        return register

    def include(self, other: MCPServer) -> None:
        """Serve every handler registered on ``other`` from this server too (names must not clash)."""
        self._add_all(self.tools, other.tools, "tool", "tools")
        self._add_all(self.resources, other.resources, "resource", "resources")
        self._add_all(self.prompts, other.prompts, "prompt", "prompts")
        self._add_all(self.methods, other.methods, "method", None)
        self._add_all(self.completions, other.completions, "completion", None)

    def _add_app(self, app: App) -> str:
        """Register ``app``'s resource unless this very view already is; its URI."""
        uri = app.uri(self.name or mcp_settings.SERVER_NAME)
        known = self.resources.get(uri)
        if not (isinstance(known, AppResource) and known.app == app):
            self._add(self.resources, uri, AppResource.of(app, uri), "resource", "resources")
        return uri

    def _add_all(
        self, table: dict[Any, Any], entries: dict[Any, Any], kind: str, feature: str | None
    ) -> None:
        for key, entry in entries.items():
            self._add(table, key, entry, kind, feature)

    def remove_tool(self, name: str) -> None:
        """Unregister a tool at run time; connected clients are told the list changed."""
        del self.tools[name]
        self._changed("tools")

    def remove_resource(self, uri: str) -> None:
        """Unregister a resource at run time."""
        del self.resources[uri]
        self._changed("resources")

    def remove_prompt(self, name: str) -> None:
        """Unregister a prompt at run time."""
        del self.prompts[name]
        self._changed("prompts")

    def _add(self, table: dict[Any, Any], key: Any, entry: Any, kind: str, feature: str | None) -> None:
        if key in table:
            raise ImproperlyConfigured(f"{self!r}: a {kind} named {key!r} is already registered")
        table[key] = entry
        if table is self.methods:
            self.handler_table = None
        if feature:
            self._changed(feature)

    # -- change notification ------------------------------------------------------------------

    def on_change(self, listener: ChangeListener) -> None:
        """Call ``listener(feature)`` whenever tools, resources or prompts change."""
        self._listeners.append(listener)

    def _changed(self, feature: str) -> None:
        for listener in list(self._listeners):
            listener(feature)

    # -- lookups -------------------------------------------------------------------------------

    def find_resource(self, uri: str) -> tuple[Resource, dict[str, str]] | None:
        """The resource serving ``uri`` (fixed URIs first, then templates) and its variables."""
        fixed = self.resources.get(uri)
        if fixed is not None and not fixed.is_template:
            return fixed, {}
        for entry in self.resources.values():
            if entry.is_template:
                variables = entry.match(uri)
                if variables is not None:
                    return entry, variables
        return None


mcp = MCPServer(key="default")
"""The default server: ``from mcp_server import mcp`` then ``@mcp.tool``."""


def server_of(ctx: Context) -> MCPServer:
    """The server a request is for, typed (``Context.server`` is the core's narrow view of it)."""
    server = ctx.server
    if not isinstance(server, MCPServer):
        raise TypeError(f"{server!r} is not an MCPServer")
    return server
