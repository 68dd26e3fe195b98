"""Expose a Django model as read-only MCP tools: a paginated, filtered, ordered list, and one row by key.

::

    from mcp_server import mcp
    from mcp_server import expose_model

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
"""

from __future__ import annotations

import base64
import binascii
import datetime
import decimal
import inspect
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal

from django.core.exceptions import FieldDoesNotExist, ImproperlyConfigured
from django.db import models
from pydantic import BaseModel, Field, create_model

from ..core.context import Context
from ..registry.entries import Permission
from ..registry.server import MCPServer
from ..wire.errors import ToolError
from .writes import WRITE_OPERATIONS, RelatedSource, register_writes

__all__ = ["DEFAULT_PERMISSION", "expose_model"]

DEFAULT_PERMISSION: Any = object()
"""Marker for ``permission=``: the model's ``view`` permission."""

TEXT_LOOKUPS = {"contains", "icontains", "startswith", "istartswith", "endswith", "iendswith", "iexact"}
LOOKUPS = TEXT_LOOKUPS | {"exact", "gt", "gte", "lt", "lte", "in", "isnull"}

_TYPES: list[tuple[type[models.Field[Any, Any]], Any]] = [
    (models.BooleanField, bool),
    (models.DateTimeField, datetime.datetime),
    (models.DateField, datetime.date),
    (models.TimeField, datetime.time),
    (models.DurationField, datetime.timedelta),
    (models.DecimalField, decimal.Decimal),
    (models.FloatField, float),
    (models.IntegerField, int),
    (models.AutoField, int),
    (models.BigAutoField, int),
    (models.SmallAutoField, int),
    (models.UUIDField, uuid.UUID),
    (models.JSONField, Any),
]

QuerySetSource = models.QuerySet[Any] | Callable[[Context], models.QuerySet[Any]] | None


def _python_type(field: models.Field[Any, Any]) -> Any:
    for field_class, python_type in _TYPES:
        if isinstance(field, field_class):
            return python_type
    return str


def _resolve(model: type[models.Model], path: str) -> tuple[Any, bool]:
    """The Python type of ``path`` (``a__b__c`` through forward relations) and whether it may be null."""
    nullable = False
    current: Any = model
    parts = path.split("__")
    for index, part in enumerate(parts):
        try:
            field = current._meta.get_field(part)
        except FieldDoesNotExist as exc:
            raise ImproperlyConfigured(f"expose_model({model.__name__}): no field {path!r}") from exc
        if field.many_to_many or field.one_to_many or not getattr(field, "concrete", False):
            raise ImproperlyConfigured(
                f"expose_model({model.__name__}): {path!r} goes through a to-many or reverse relation"
            )
        nullable = nullable or bool(field.null)
        if field.is_relation:
            current = field.related_model
            if index == len(parts) - 1:
                return _python_type(current._meta.pk), nullable
        elif index < len(parts) - 1:
            raise ImproperlyConfigured(f"expose_model({model.__name__}): {part!r} in {path!r} is no relation")
        else:
            return _python_type(field), nullable
    raise ImproperlyConfigured(f"expose_model({model.__name__}): empty field path")


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


def _encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> int:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        offset = json.loads(base64.urlsafe_b64decode(padded.encode()))["o"]
    except (binascii.Error, ValueError, KeyError, TypeError) as exc:
        raise ToolError("Invalid cursor") from exc
    if not isinstance(offset, int) or offset < 0:
        raise ToolError("Invalid cursor")
    return offset


def _base_queryset(model: type[models.Model], queryset: QuerySetSource, ctx: Context) -> models.QuerySet[Any]:
    if queryset is None:
        return model._default_manager.all()
    if callable(queryset) and not isinstance(queryset, models.QuerySet):
        return queryset(ctx)
    return queryset.all()


def _make_handler(
    fn: Callable[..., Any], name: str, parameters: list[inspect.Parameter], returns: Any
) -> Callable[..., Any]:
    fn.__name__ = fn.__qualname__ = name
    fn.__signature__ = inspect.Signature(parameters, return_annotation=returns)  # type: ignore[attr-defined]
    fn.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": returns}
    return fn


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
    types = {path: _resolve(model, path) for path in fields}
    if permission is DEFAULT_PERMISSION:
        permission = f"{opts.app_label}.view_{opts.model_name}"
    item_fields: dict[str, Any] = {
        path: (python_type | None if nullable else python_type, ...)
        for path, (python_type, nullable) in types.items()
    }
    Item = create_model(f"{label.title().replace('_', '')}Item", __base__=BaseModel, **item_fields)
    Page = create_model(
        f"{label.title().replace('_', '')}Page",
        __base__=BaseModel,
        items=(list[Item], ...),  # type: ignore[valid-type]
        next_cursor=(str | None, None),
    )

    filter_specs = {f: _split_filter(f, fields) for f in filters}
    for sort in ordering:
        if sort not in types:
            raise ImproperlyConfigured(
                f"expose_model({model.__name__}): ordering {sort!r} is not an exposed field"
            )
    keyword = inspect.Parameter.KEYWORD_ONLY
    list_params: list[inspect.Parameter] = []
    for filter_name, (path, lookup_name) in filter_specs.items():
        python_type = types[path][0]
        annotation: Any = (
            bool if lookup_name == "isnull" else str if lookup_name in TEXT_LOOKUPS else python_type
        )
        if lookup_name == "in":
            annotation = list[python_type]  # type: ignore[valid-type]
        list_params.append(
            inspect.Parameter(filter_name, keyword, default=None, annotation=annotation | None)
        )
    if ordering:
        choices = tuple(o for sort in ordering for o in (sort, f"-{sort}"))
        list_params.append(
            inspect.Parameter("order_by", keyword, default=None, annotation=Literal[choices] | None)
        )
    list_params += [
        inspect.Parameter(
            "limit", keyword, default=page_size, annotation=Annotated[int, Field(ge=1, le=page_size)]
        ),
        inspect.Parameter("cursor", keyword, default=None, annotation=str | None),
        inspect.Parameter("ctx", keyword, annotation=Context),
    ]

    async def list_rows(**arguments: Any) -> Any:
        ctx: Context = arguments.pop("ctx")
        rows = _base_queryset(model, queryset, ctx)
        conditions = {f: arguments[f] for f in filter_specs if arguments.get(f) is not None}
        if conditions:
            rows = rows.filter(**conditions)
        order = arguments.get("order_by")
        rows = rows.order_by(order, "pk") if order else rows.order_by(*(opts.ordering or []), "pk")
        offset = _decode_cursor(arguments["cursor"]) if arguments.get("cursor") else 0
        limit = int(arguments["limit"])
        found = [row async for row in rows.values(*fields)[offset : offset + limit + 1]]
        next_cursor = _encode_cursor(offset + limit) if len(found) > limit else None
        return Page(items=[Item(**row) for row in found[:limit]], next_cursor=next_cursor)

    key_field: Any = opts.pk if lookup == "pk" else opts.get_field(lookup)
    if not (key_field.primary_key or key_field.unique):
        raise ImproperlyConfigured(f"expose_model({model.__name__}): lookup {lookup!r} is not a unique field")
    key_name = key_field.name
    key_type = _python_type(key_field.target_field if key_field.is_relation else key_field)
    get_params = [
        inspect.Parameter(key_name, keyword, annotation=key_type),
        inspect.Parameter("ctx", keyword, annotation=Context),
    ]

    async def get_row(**arguments: Any) -> Any:
        ctx: Context = arguments.pop("ctx")
        value = arguments[key_name]
        row = await _base_queryset(model, queryset, ctx).filter(**{key_name: value}).values(*fields).afirst()
        if row is None:
            raise ToolError(f"No {opts.verbose_name} with {key_name} {value!r}")
        return Item(**row)

    plural, singular = str(opts.verbose_name_plural), str(opts.verbose_name)
    list_name, get_name = f"{label}_list", f"{label}_get"
    filters_text = f" Filters: {', '.join(filter_specs)}." if filter_specs else ""
    read_only = {"readOnlyHint": True, "idempotentHint": True}
    server.tool(
        name=list_name,
        description=f"List {plural}, {page_size} at most per page; pass next_cursor back as cursor for more."
        + filters_text,
        annotations=read_only,
        permission=permission,
    )(_make_handler(list_rows, list_name, list_params, Page))
    server.tool(
        name=get_name,
        description=f"One {singular} by its {key_name}.",
        annotations=read_only,
        permission=permission,
    )(_make_handler(get_row, get_name, get_params, Item))
    if not writes:
        if related_querysets:
            raise ImproperlyConfigured(f"expose_model({model.__name__}): related_querysets needs writes=")
        return list_name, get_name
    written = _register_write_tools(
        server,
        model,
        label=label,
        fields=fields,
        writes=writes,
        write_permissions=write_permissions,
        key=(key_name, key_type),
        rows=lambda ctx: _base_queryset(model, queryset, ctx),
        item=Item,
        related=related_querysets,
    )
    return (list_name, get_name, *written)


def _register_write_tools(
    server: MCPServer,
    model: type[models.Model],
    *,
    label: str,
    fields: Sequence[str],
    writes: bool | Sequence[str],
    write_permissions: Mapping[str, Permission] | None,
    key: tuple[str, Any],
    rows: Callable[[Context], models.QuerySet[Any]],
    item: Any,
    related: Mapping[str, RelatedSource] | None,
) -> list[str]:
    """``expose_model``'s write tools: the operations ``writes`` names, with their default permissions."""
    opts = model._meta
    operations = WRITE_OPERATIONS if isinstance(writes, bool) else tuple(writes)
    defaults = {"create": "add", "update": "change", "delete": "delete"}
    permissions: dict[str, Permission] = {
        operation: f"{opts.app_label}.{defaults[operation]}_{opts.model_name}"
        for operation in WRITE_OPERATIONS
    }
    permissions.update(write_permissions or {})
    return register_writes(
        server,
        model,
        label=label,
        fields=fields,
        operations=operations,
        permissions=permissions,
        key_name=key[0],
        key_type=key[1],
        rows=rows,
        item=item,
        python_type=_python_type,
        make_handler=_make_handler,
        related=related,
    )
