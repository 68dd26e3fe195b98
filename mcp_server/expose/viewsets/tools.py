"""``expose_viewset``: a DRF viewset's routes as MCP tools, run through the viewset itself."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import mcp_types as mt
from django.db import DEFAULT_DB_ALIAS, router, transaction
from rest_framework.utils.encoders import JSONEncoder
from rest_framework.viewsets import ViewSetMixin

from ...core.context import Context
from ...core.writes import write_transaction
from ...registry.entries import Permission
from ...registry.server import MCPServer
from ...wire.errors import ToolError
from .errors import refusal_message
from .requests import build_request
from .routes import Route, model_of, routes_of

__all__ = ["DEFAULT_ANNOTATIONS", "expose_viewset"]

DEFAULT_ANNOTATIONS: dict[str, dict[str, bool]] = {
    "list": {"readOnlyHint": True, "idempotentHint": True},
    "retrieve": {"readOnlyHint": True, "idempotentHint": True},
    "create": {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False},
    "update": {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True},
    "partial_update": {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True},
    "destroy": {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True},
}
"""Per standard action; an ``@action`` is ``readOnlyHint`` for GET, else ``readOnlyHint: false`` only."""


def _jsonable(data: Any) -> Any:
    """The response data as DRF's JSON renderer would write it (Decimals, dates, UUIDs, lazy strings)."""
    return json.loads(json.dumps(data, cls=JSONEncoder))


def _describe(route: Route, singular: str, plural: str, lookup: str) -> str:
    if route.extra:
        doc = " ".join((route.doc or "").strip().split("\n\n")[0].split())
        return doc or f"The {route.action.replace('_', ' ')} action ({route.method.upper()})."
    paging = ", ".join(f"`{name}`" for name in route.page_parameters)
    return {
        "list": f"List {plural}."
        + (
            f" The answer is one page: for the next, pass the {paging} value(s) of its `next` link's query "
            "string as the argument(s) of the same name."
            if paging
            else ""
        ),
        "retrieve": f"One {singular}, by its {lookup}.",
        "create": f"Create a {singular}; returns it.",
        "update": f"Replace a {singular} found by its {lookup}: give every required field.",
        "partial_update": f"Change some fields of a {singular} found by its {lookup}: only those given.",
        "destroy": f"Delete a {singular} found by its {lookup}.",
    }[route.action]


def _hints(route: Route, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A route's tool annotations: the defaults of its action (an ``@action``'s by its method), then
    ``overrides``."""
    if not route.extra:
        hints: dict[str, Any] = dict(DEFAULT_ANNOTATIONS[route.action])
    elif route.writes:
        hints = {"readOnlyHint": False}
    else:
        hints = {"readOnlyHint": True, "idempotentHint": True}
    hints.update(overrides)
    return hints


class _Caller:
    """Runs one route of the viewset for a tool call (in the registry's worker thread: DRF is sync)."""

    def __init__(self, viewset: type[Any], route: Route, lookup: str, using: str) -> None:
        self.route = route
        self.lookup = lookup
        self.using = using
        self.known = set(route.input_schema.get("properties", {})) if not route.extra else None
        self.view = viewset.as_view({route.method: route.action}, **route.initkwargs)

    def __call__(self, ctx: Context, **arguments: Any) -> Any:
        route = self.route
        if self.known is not None:
            unknown = sorted(set(arguments) - self.known)
            if unknown:
                raise ToolError(f"Unknown argument(s): {', '.join(unknown)}")
        kwargs: dict[str, str] = {}
        lookup_value: Any = None
        if route.detail:
            if self.lookup not in arguments:
                raise ToolError(f"Invalid arguments: {self.lookup}: This field is required.")
            lookup_value = arguments[self.lookup] if route.lookup_in_body else arguments.pop(self.lookup)
            kwargs[self.lookup] = str(lookup_value)
        if route.query:
            request = build_request(ctx, route.method, query=arguments)
        else:
            request = build_request(ctx, route.method, data=arguments)
        if route.writes:
            with write_transaction(self.using):
                response = self.view(request, **kwargs)
                if 200 <= response.status_code < 300:
                    ctx.claim_answer(using=self.using)
                else:
                    transaction.set_rollback(True, using=self.using)
        else:
            response = self.view(request, **kwargs)
        return self.answer(response, lookup_value)

    def answer(self, response: Any, lookup_value: Any) -> Any:
        status = int(response.status_code)
        data = getattr(response, "data", None)
        if not 200 <= status < 300:
            if data is None:
                data = {"detail": getattr(response, "reason_phrase", "") or str(status)}
            raise ToolError(refusal_message(status, _jsonable(data), response.get("Retry-After")))
        if self.route.action == "destroy":
            integer = self.route.input_schema["properties"][self.lookup].get("type") == "integer"
            if integer and isinstance(lookup_value, str) and lookup_value.isdigit():
                lookup_value = int(lookup_value)
            return {"deleted": lookup_value}
        if not hasattr(response, "data"):  # a plain HttpResponse from an @action
            if hasattr(response, "render"):
                response.render()
            return response.content.decode(response.charset or "utf-8", errors="replace")
        data = _jsonable(data)
        if self.route.action == "list" and isinstance(data, list):
            return {"items": data}
        if self.route.extra:
            text: list[mt.ContentBlock] = []
            if data is not None:
                text.append(mt.TextContent(type="text", text=json.dumps(data, ensure_ascii=False)))
            if isinstance(data, dict):
                return mt.CallToolResult(content=text, structured_content=data)
            return mt.CallToolResult(content=text)
        return data


def expose_viewset(
    server: MCPServer,
    viewset: type[Any],
    *,
    name: str,
    actions: Sequence[str] | None = None,
    permission: Permission | Mapping[str, Permission] = None,
    descriptions: Mapping[str, str] | None = None,
    annotations: Mapping[str, Mapping[str, Any]] | None = None,
    methods: Mapping[str, str] | None = None,
) -> tuple[str, ...]:
    """Register a tool per route of a DRF ``GenericViewSet``; returns the tools' names.

    ``<name>_list``, ``<name>_retrieve``, ``<name>_create``, ``<name>_update``, ``<name>_partial_update``,
    ``<name>_destroy`` for the standard actions the viewset has, and ``<name>_<action>`` for each ``@action``
    (by the first of its HTTP methods). Input schemas come from the serializer (DRF's OpenAPI mapping), the
    paginator's and filter backends' query parameters and the lookup; output schemas from the serializer.
    Each call runs the viewset as over HTTP, with the MCP caller as ``request.user``: its
    ``permission_classes``, ``throttle_classes``, ``get_queryset``, ``filter_backends``, paginator and
    serializer decide; a refusal (4xx) is a tool error naming each failing field. Writes run in
    ``transaction.atomic`` and claim the request's answer (``ctx.claim_answer``) before they commit.

    ``actions``: the action names to expose (default: all). ``permission``: this registry's per-tool
    permission on top of the viewset's own (default ``None``: the viewset's decide), one for all tools or a
    mapping by action. ``descriptions``, ``annotations``: per action, override the defaults. ``methods``: per
    ``@action`` with several HTTP methods, the one its tool uses (default: the first).
    """
    if not (
        isinstance(viewset, type) and issubclass(viewset, ViewSetMixin) and hasattr(viewset, "get_object")
    ):
        raise TypeError(
            f"expose_viewset: {viewset!r} is not a GenericViewSet (ViewSetMixin + GenericAPIView)"
        )
    only = list(actions) if actions is not None else None
    routes = routes_of(viewset, basename=name, only=only, methods=methods)
    model = model_of(viewset)
    using = router.db_for_write(model) if model is not None else DEFAULT_DB_ALIAS
    singular = str(model._meta.verbose_name) if model is not None else "item"
    plural = str(model._meta.verbose_name_plural) if model is not None else "items"
    lookup = viewset.lookup_url_kwarg or viewset.lookup_field
    names: list[str] = []
    for route in routes:
        tool_name = f"{name}_{route.action}"
        tool_permission = permission.get(route.action) if isinstance(permission, Mapping) else permission
        hints = _hints(route, (annotations or {}).get(route.action, {}))
        description = (descriptions or {}).get(route.action) or _describe(route, singular, plural, lookup)
        caller = _Caller(viewset, route, lookup, using)
        handler: Callable[..., Any] = caller.__call__
        server.tool(
            name=tool_name,
            description=description,
            annotations=hints,
            permission=tool_permission,
            input_schema=route.input_schema,
            output_schema=route.output_schema,
        )(handler)
        names.append(tool_name)
    return tuple(names)
