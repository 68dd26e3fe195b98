"""The routes of a viewset a router would make, each with the schemas of its tool.

A route is one action reached by one HTTP method: the standard ones (``list``, ``retrieve``, ``create``,
``update``, ``partial_update``, ``destroy``) the viewset defines, and each ``@action`` (by the first of its
methods). Its schemas are read from a view instance set up as the router's view would be for that action
(``action``, ``detail``, the ``@action``'s own ``serializer_class``, ``permission_classes``, ...).

An ``@action`` that names no ``serializer_class=`` of its own may or may not read the viewset's serializer
(``get_serializer``) from its body: nothing static tells. Its input schema offers that serializer's writable
fields, none of them required, and accepts other properties; a detail action requires its lookup.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import models

from .schema import input_schema, list_output_schema, object_schema, output_schema, to_json_schema

__all__ = ["STANDARD_ACTIONS", "Route", "lookup_schema", "model_of", "routes_of"]

STANDARD_ACTIONS: dict[str, tuple[str, bool]] = {
    "list": ("get", False),
    "retrieve": ("get", True),
    "create": ("post", False),
    "update": ("put", True),
    "partial_update": ("patch", True),
    "destroy": ("delete", True),
}
"""Action name: (HTTP method, whether it acts on one object found by the lookup)."""

Schema = dict[str, Any]


@dataclass
class Route:
    """One tool's worth of a viewset."""

    action: str
    method: str
    detail: bool
    initkwargs: dict[str, Any]
    extra: bool = False
    doc: str | None = None
    input_schema: Schema = field(default_factory=dict)
    output_schema: Schema | None = None
    query: bool = False
    """Arguments go to the query string (GET), not to a JSON body."""
    page_parameters: tuple[str, ...] = ()
    """A list route's paginator's query parameters (``page``; ``limit``, ``offset``; ``cursor``)."""
    lookup_in_body: bool = False
    """The serializer has a writable field named as the lookup: the argument also goes to the body."""

    @property
    def writes(self) -> bool:
        return self.method not in ("get", "head", "options")


def model_of(viewset: type[Any]) -> type[models.Model] | None:
    """The model of the viewset's ``queryset``, else of its serializer's ``Meta``."""
    queryset = getattr(viewset, "queryset", None)
    if queryset is not None:
        return queryset.model  # type: ignore[no-any-return]
    meta = getattr(getattr(viewset, "serializer_class", None), "Meta", None)
    return getattr(meta, "model", None)


def _anonymous_request(method: str) -> Any:
    """What ``view.request`` is while the schemas are read: an anonymous DRF request, so that a viewset whose
    ``get_serializer_class`` looks at ``self.request.user`` can answer."""
    from django.contrib.auth.models import AnonymousUser
    from django.core.handlers.wsgi import WSGIRequest
    from rest_framework.request import Request

    http = WSGIRequest(
        {"REQUEST_METHOD": method.upper(), "PATH_INFO": "/", "wsgi.input": io.BytesIO(), "SERVER_NAME": "x"}
    )
    request = Request(http, authenticators=())
    request.user = AnonymousUser()
    return request


def view_for(viewset: type[Any], route: Route) -> Any:
    """A view instance as the router's would be while handling ``route``, with an anonymous request."""
    view = viewset(**route.initkwargs)
    view.action = route.action
    view.action_map = {route.method: route.action}
    view.request = _anonymous_request(route.method)
    view.format_kwarg = None
    view.args = ()
    view.kwargs = {}
    return view


def lookup_schema(viewset: type[Any], serializer: Any) -> Schema:
    """The lookup argument's schema: its serializer field's, else from the model field, else a string."""
    lookup_field = viewset.lookup_field
    if serializer is not None and lookup_field in getattr(serializer, "fields", {}):
        schema = object_schema(serializer)["properties"].get(lookup_field, {})
        kept = {k: v for k, v in schema.items() if k in ("type", "format", "pattern", "enum")}
        if isinstance(kept.get("type"), list):  # a lookup is never null
            kept["type"] = next(t for t in kept["type"] if t != "null")
        if kept:
            return kept
    model = model_of(viewset)
    if model is not None:
        try:
            model_field: Any = model._meta.pk if lookup_field == "pk" else model._meta.get_field(lookup_field)
        except Exception:
            model_field = None
        if model_field is not None:
            internal = model_field.target_field if model_field.is_relation else model_field
            if internal.get_internal_type().endswith(("AutoField", "IntegerField")):
                return {"type": "integer"}
    return {"type": "string"}


def _list_parameters(view: Any) -> tuple[Schema, list[str], tuple[str, ...]]:
    """The query parameters of the list route (the paginator's, then each filter backend's), those required,
    and the names of the paginator's."""
    parameters: list[Schema] = []
    if view.paginator is not None:
        parameters += view.paginator.get_schema_operation_parameters(view)
    paging = tuple(str(parameter["name"]) for parameter in parameters)
    for backend in getattr(view, "filter_backends", None) or ():
        get_parameters = getattr(backend(), "get_schema_operation_parameters", None)
        if get_parameters is not None:
            parameters += get_parameters(view)
    properties: Schema = {}
    required: list[str] = []
    for parameter in parameters:
        if parameter.get("in", "query") != "query":
            continue
        schema = to_json_schema(dict(parameter.get("schema") or {}))
        if parameter.get("description"):
            schema.setdefault("description", str(parameter["description"]))
        properties[parameter["name"]] = schema
        if parameter.get("required"):
            required.append(parameter["name"])
    return properties, required, paging


def _may_skip_pagination(paginator: Any) -> bool:
    """Whether the paginator answers a plain list when no page size is set (DRF's default ``PAGE_SIZE``)."""
    return getattr(paginator, "page_size", 0) is None or getattr(paginator, "default_limit", 0) is None


def _body_schema(serializer: Any, route: Route) -> Schema:
    """A write's body: the serializer's writable fields; for an ``@action`` without a ``serializer_class`` of
    its own, the viewset's, none required (it may not read them at all)."""
    schema = input_schema(serializer)
    if route.extra and "serializer_class" not in route.initkwargs:
        schema.pop("required", None)
    return schema


def _fill(viewset: type[Any], route: Route) -> None:
    view = view_for(viewset, route)
    lookup = viewset.lookup_url_kwarg or viewset.lookup_field
    try:
        serializer = view.get_serializer(partial=route.action == "partial_update")
    except Exception as exc:
        if not route.extra:
            raise ImproperlyConfigured(
                f"expose_viewset({viewset.__name__}): no serializer for {route.action!r}: {exc}"
            ) from exc
        serializer = None
    schema: Schema
    if route.action == "list" or (route.extra and route.query):
        properties, required, route.page_parameters = (
            _list_parameters(view) if route.action == "list" else ({}, [], ())
        )
        schema = {"type": "object", "properties": properties}
        if required:
            schema["required"] = required
    elif serializer is not None and route.action != "destroy" and route.writes:
        schema = _body_schema(serializer, route)
    else:
        schema = {"type": "object", "properties": {}}
    if route.detail:
        route.lookup_in_body = lookup in schema["properties"] and not route.query
        schema["properties"] = {lookup: lookup_schema(viewset, serializer), **schema["properties"]}
        schema["required"] = [lookup, *[name for name in schema.get("required", []) if name != lookup]]
    if not route.extra:
        schema["additionalProperties"] = False
    route.input_schema = schema
    if route.extra:
        return
    if route.action == "destroy":
        deleted = {"deleted": lookup_schema(viewset, serializer)}
        route.output_schema = {"type": "object", "properties": deleted, "required": ["deleted"]}
        return
    item = output_schema(serializer)
    if route.action != "list":
        route.output_schema = item
        return
    paginator = view.paginator
    paged = list_output_schema(item, paginator)
    if paginator is not None and _may_skip_pagination(paginator):
        plain = list_output_schema(item, None)
        paged = {"type": "object", "anyOf": [paged, plain]}
    route.output_schema = paged


def routes_of(
    viewset: type[Any],
    *,
    basename: str,
    only: list[str] | None = None,
    methods: Mapping[str, str] | None = None,
) -> list[Route]:
    """The viewset's routes (only those named in ``only``, when given), schemas filled in. An ``@action``
    answers to the first of its methods, or to the one ``methods`` names for it."""
    routes: list[Route] = []
    for action, (method, detail) in STANDARD_ACTIONS.items():
        if hasattr(viewset, action):
            initkwargs = {"basename": basename, "detail": detail}
            routes.append(Route(action, method, detail, initkwargs, query=method == "get"))
    for extra in viewset.get_extra_actions():
        method = (methods or {}).get(extra.__name__, next(iter(extra.mapping))).lower()
        if method not in extra.mapping:
            raise ImproperlyConfigured(
                f"expose_viewset({viewset.__name__}): the action {extra.__name__!r} does not answer {method}"
            )
        initkwargs = {"basename": basename, "detail": extra.detail, **extra.kwargs}
        doc = extra.__doc__
        routes.append(
            Route(extra.mapping[method], method, extra.detail, initkwargs, True, doc, query=method == "get")
        )
    if only is not None:
        known = {route.action for route in routes}
        unknown = [name for name in only if name not in known]
        if unknown:
            raise ImproperlyConfigured(
                f"expose_viewset({viewset.__name__}): no action {', '.join(map(repr, unknown))} "
                f"(it has {', '.join(sorted(known))})"
            )
        routes = [route for route in routes if route.action in only]
    for route in routes:
        _fill(viewset, route)
    return routes
