"""Expose a Django model as read-only MCP tools: a paginated, filtered, ordered list, and one row by key.

::

    from mcp_server import expose_model, mcp

    expose_model(
        mcp, Book,
        fields=["id", "title", "year", "author__name"],
        filters=["title__icontains", "year", "year__gte", "author__name"],
        ordering=["title", "year"],
        name="books",
    )

registers ``books_list`` (arguments: the filters, ``order_by``, ``limit``, ``cursor``; result:
``{"items": [...], "next_cursor": ...}``) and ``books_get`` (argument: the primary key). Only the fields
named are ever read or returned, filters and ordering may only use those fields, and both tools require
the model's ``view`` permission (``app_label.view_model``) unless ``permission=`` says otherwise.
``writes=`` adds the write tools (``mcp_server.expose.writes``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from django.core.exceptions import ImproperlyConfigured
from django.db import models
from pydantic import BaseModel, Field, create_model

from ..core.context import Context
from ..protocol.pagination import InvalidCursor, decode_cursor, encode_cursor
from ..registry.entries import Permission
from ..registry.server import MCPServer
from ..wire.errors import ToolError
from .fields import path_type, python_type
from .schema import DEFAULT_PERMISSION, ctx_parameter, keyword, make_handler
from .writes import WRITE_OPERATIONS, RelatedSource, Rows, operation_permissions, register_writes

__all__ = ["DEFAULT_PERMISSION", "expose_model"]

TEXT_LOOKUPS = {"contains", "icontains", "startswith", "istartswith", "endswith", "iendswith", "iexact"}
LOOKUPS = TEXT_LOOKUPS | {"exact", "gt", "gte", "lt", "lte", "in", "isnull"}

QuerySetSource = models.QuerySet[Any] | Callable[[Context], models.QuerySet[Any]] | None
FilterSpecs = dict[str, tuple[str, str]]
"""Per filter argument: the exposed field path it filters and the lookup (``exact`` when none is named)."""

_READ_ONLY = {"readOnlyHint": True, "idempotentHint": True}


def _split_filter(filter_name: str, fields: Sequence[str]) -> tuple[str, str]:
    """``("author__name", "icontains")`` for ``"author__name__icontains"``; the path must be in ``fields``."""
    for path in sorted(fields, key=len, reverse=True):
        if filter_name == path:
            return path, "exact"
        if filter_name.startswith(path + "__"):
            lookup = filter_name[len(path) + 2 :]
            if lookup in LOOKUPS:
                return path, lookup
            raise ImproperlyConfigured(
                f"expose_model: in {filter_name!r}, {lookup!r} is neither a supported lookup nor a field"
            )
    raise ImproperlyConfigured(f"expose_model: filter {filter_name!r} is not on one of the exposed fields")


def _offset(cursor: str | None) -> int:
    """Where the page starts: 0 without a cursor, else the offset the cursor carries (the protocol's codec,
    that of the list methods' cursors)."""
    if not cursor:
        return 0
    try:
        return decode_cursor(cursor)
    except InvalidCursor as exc:
        raise ToolError("Invalid cursor") from exc


def _rows_of(model: type[models.Model], queryset: QuerySetSource) -> Rows:
    """The rows both tools (and the write tools) start from, per call: ``queryset=``, by default every row."""

    def rows(ctx: Context) -> models.QuerySet[Any]:
        if queryset is None:
            return model._default_manager.all()
        if callable(queryset) and not isinstance(queryset, models.QuerySet):
            return queryset(ctx)
        return queryset.all()

    return rows


def _row_models(label: str, types: Mapping[str, tuple[Any, bool]]) -> tuple[Any, Any]:
    """The pydantic models of one row (``<Label>Item``: the exposed fields, ``None`` where nullable) and of
    one page of the list (``<Label>Page``: ``items`` and ``next_cursor``)."""
    item_fields: dict[str, Any] = {
        path: (field_type | None if nullable else field_type, ...)
        for path, (field_type, nullable) in types.items()
    }
    item = create_model(f"{label.title().replace('_', '')}Item", __base__=BaseModel, **item_fields)
    page = create_model(
        f"{label.title().replace('_', '')}Page",
        __base__=BaseModel,
        items=(list[item], ...),  # type: ignore[valid-type]
        next_cursor=(str | None, None),
    )
    return item, page


def _check_ordering(model: type[models.Model], ordering: Sequence[str], types: Mapping[str, Any]) -> None:
    for sort in ordering:
        if sort not in types:
            raise ImproperlyConfigured(
                f"expose_model({model.__name__}): ordering {sort!r} is not an exposed field"
            )


def _key_of(model: type[models.Model], lookup: str) -> tuple[str, Any]:
    """The name and Python type of the unique field ``<name>_get`` (and update, delete) find a row by."""
    opts = model._meta
    key_field: Any = opts.pk if lookup == "pk" else opts.get_field(lookup)
    if not (key_field.primary_key or key_field.unique):
        raise ImproperlyConfigured(f"expose_model({model.__name__}): lookup {lookup!r} is not a unique field")
    return key_field.name, python_type(key_field.target_field if key_field.is_relation else key_field)


def _filter_annotation(field_type: Any, lookup: str) -> Any:
    """A filter argument's type: a list for ``in``, a boolean for ``isnull``, text for the text lookups."""
    if lookup == "in":
        return list[field_type]
    if lookup == "isnull":
        return bool
    return str if lookup in TEXT_LOOKUPS else field_type


def _list_parameters(
    types: Mapping[str, tuple[Any, bool]], filter_specs: FilterSpecs, ordering: Sequence[str], page_size: int
) -> list[inspect.Parameter]:
    """The list tool's arguments: each filter, ``order_by`` (a field or ``-field``), ``limit``, ``cursor``."""
    params = [
        keyword(filter_name, _filter_annotation(types[path][0], lookup) | None, default=None)
        for filter_name, (path, lookup) in filter_specs.items()
    ]
    if ordering:
        choices = tuple(o for sort in ordering for o in (sort, f"-{sort}"))
        params.append(keyword("order_by", Literal[choices] | None, default=None))
    return [
        *params,
        keyword("limit", Annotated[int, Field(ge=1, le=page_size)], default=page_size),
        keyword("cursor", str | None, default=None),
        ctx_parameter(),
    ]


@dataclass(frozen=True)
class _ReadTools:
    """What the list and get tools of one model share."""

    server: MCPServer
    model: type[models.Model]
    label: str
    fields: Sequence[str]
    rows: Rows
    item: Any
    permission: Permission

    def register(
        self,
        suffix: str,
        description: str,
        fn: Callable[..., Any],
        params: list[inspect.Parameter],
        returns: Any,
    ) -> str:
        tool_name = f"{self.label}_{suffix}"
        self.server.tool(
            name=tool_name, description=description, annotations=dict(_READ_ONLY), permission=self.permission
        )(make_handler(fn, tool_name, params, returns))
        return tool_name


def _register_list(
    tools: _ReadTools, filter_specs: FilterSpecs, params: list[inspect.Parameter], page: Any, page_size: int
) -> str:
    """``<label>_list``: one page of the rows the filters keep, in the order asked (ties by primary key)."""
    opts, fields, item = tools.model._meta, tools.fields, tools.item

    async def list_rows(**arguments: Any) -> Any:
        ctx: Context = arguments.pop("ctx")
        rows = tools.rows(ctx)
        conditions = {f: arguments[f] for f in filter_specs if arguments.get(f) is not None}
        if conditions:
            rows = rows.filter(**conditions)
        order = arguments.get("order_by")
        rows = rows.order_by(order, "pk") if order else rows.order_by(*(opts.ordering or []), "pk")
        offset = _offset(arguments.get("cursor"))
        limit = int(arguments["limit"])
        found = [row async for row in rows.values(*fields)[offset : offset + limit + 1]]
        next_cursor = encode_cursor(offset + limit) if len(found) > limit else None
        return page(items=[item(**row) for row in found[:limit]], next_cursor=next_cursor)

    more = "; pass next_cursor back as cursor for more."
    filters_text = f" Filters: {', '.join(filter_specs)}." if filter_specs else ""
    description = f"List {opts.verbose_name_plural}, {page_size} at most per page{more}{filters_text}"
    return tools.register("list", description, list_rows, params, page)


def _register_get(tools: _ReadTools, key_name: str, key_type: Any) -> str:
    """``<label>_get``: the row of the tool's rows with that key, or a tool error naming the key."""
    opts, fields, item = tools.model._meta, tools.fields, tools.item

    async def get_row(**arguments: Any) -> Any:
        ctx: Context = arguments.pop("ctx")
        value = arguments[key_name]
        row = await tools.rows(ctx).filter(**{key_name: value}).values(*fields).afirst()
        if row is None:
            raise ToolError(f"No {opts.verbose_name} with {key_name} {value!r}")
        return item(**row)

    params = [keyword(key_name, key_type), ctx_parameter()]
    return tools.register("get", f"One {opts.verbose_name} by its {key_name}.", get_row, params, item)


def expose_model(
    server: MCPServer,
    model: type[models.Model],
    *,
    fields: Sequence[str],
    filters: Sequence[str] = (),
    ordering: Sequence[str] = (),
    name: str | None = None,
    lookup: str = "pk",
    queryset: QuerySetSource = None,
    permission: Permission = DEFAULT_PERMISSION,
    page_size: int = 50,
    writes: bool | Sequence[str] = False,
    write_permissions: Mapping[str, Permission] | None = None,
    related_querysets: Mapping[str, RelatedSource] | None = None,
) -> tuple[str, ...]:
    """Register ``<name>_list`` and ``<name>_get`` on ``server``; returns their names.

    ``fields``: what each item carries (field paths; ``author__name`` follows a foreign key).
    ``filters``: optional arguments of the list tool, each an exposed field optionally followed by one of
    the lookups ``exact, iexact, contains, icontains, startswith, istartswith, endswith, iendswith, gt, gte,
    lt, lte, in, isnull``. ``ordering``: exposed fields the client may sort by (``order_by`` takes the name or
    ``-name``); ties are broken by primary key. ``lookup``: the unique field ``<name>_get`` finds a row by.
    ``queryset``: a queryset, or a callable taking the ``Context``, to start from (default: every row).
    ``permission``: default ``app_label.view_<model>``; ``None`` opens the tools to everyone.
    ``writes``: ``True`` for ``<name>_create``, ``<name>_update`` and ``<name>_delete``, or a list of some of
    ``"create", "update", "delete"``; they set only the exposed fields on the model itself (``author`` takes
    the author's key; ``author__name`` is read-only), update and delete reach only the rows of ``queryset``,
    and a create or update whose row would fall outside it is refused. ``write_permissions``: per operation,
    overrides the default ``app_label.add_/change_/delete_<model>`` (``None`` opens that tool to everyone).
    ``related_querysets``: per writable foreign key, the rows it may point at (a queryset, or a callable
    taking the ``Context``), on top of the model field's ``limit_choices_to``.
    """
    opts = model._meta
    label = name or str(opts.model_name)
    if not fields:
        raise ImproperlyConfigured(f"expose_model({model.__name__}): name at least one field")
    types = {path: path_type(model, path) for path in fields}
    if permission is DEFAULT_PERMISSION:
        permission = f"{opts.app_label}.view_{opts.model_name}"
    item, page = _row_models(label, types)
    filter_specs = {f: _split_filter(f, fields) for f in filters}
    _check_ordering(model, ordering, types)
    list_params = _list_parameters(types, filter_specs, ordering, page_size)
    key_name, key_type = _key_of(model, lookup)
    tools = _ReadTools(server, model, label, fields, _rows_of(model, queryset), item, permission)
    names = (
        _register_list(tools, filter_specs, list_params, page, page_size),
        _register_get(tools, key_name, key_type),
    )
    if not writes:
        if related_querysets:
            raise ImproperlyConfigured(f"expose_model({model.__name__}): related_querysets needs writes=")
        return names
    written = _register_writes(tools, writes, write_permissions, (key_name, key_type), related_querysets)
    return (*names, *written)


def _register_writes(
    tools: _ReadTools,
    writes: bool | Sequence[str],
    overrides: Mapping[str, Permission] | None,
    key: tuple[str, Any],
    related: Mapping[str, RelatedSource] | None,
) -> list[str]:
    """``expose_model``'s write tools: the operations ``writes`` names, on the rows the read tools reach."""
    return register_writes(
        tools.server,
        tools.model,
        label=tools.label,
        fields=tools.fields,
        operations=WRITE_OPERATIONS if isinstance(writes, bool) else tuple(writes),
        permissions=operation_permissions(tools.model, overrides),
        key_name=key[0],
        key_type=key[1],
        rows=tools.rows,
        item=tools.item,
        related=related,
    )
