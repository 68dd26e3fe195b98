"""The opt-in write tools of ``expose_model``: ``<name>_create``, ``<name>_update``, ``<name>_delete``.

Each runs in a worker thread inside ``write_transaction`` (``transaction.atomic``, begun ``IMMEDIATE`` on
SQLite): the row is built or changed from the allowed fields only, ``full_clean()`` validates it (a
``ValidationError`` becomes a tool error naming each failing field, and nothing is written), then it is saved
and read back with the same fields as ``<name>_get``, and the request's answer is claimed
(``Context.claim_answer``) before the commit: a request cancelled, timed out or closed before that point rolls
back; after it, it commits and is answered.

A write never reaches outside the tool's rows: a foreign key may only name a row of its field's
``limit_choices_to`` (``full_clean``) and of its ``related_querysets=`` entry, and the row written is read
back through ``queryset=``: a create or update whose result falls outside it is refused and rolled back.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.db import models, router

from ..core.context import Context
from ..core.writes import write_transaction
from ..registry.entries import Permission
from ..registry.server import MCPServer
from ..registry.signature import call_handler
from ..wire.errors import ToolError
from .fields import value_type
from .schema import ctx_parameter, keyword, make_handler

__all__ = [
    "WRITE_OPERATIONS",
    "RelatedSource",
    "RowWriter",
    "claim_answer",
    "operation_permissions",
    "register_writes",
    "related_sources",
]

WRITE_OPERATIONS = ("create", "update", "delete")
_VERBS = {"create": "add", "update": "change", "delete": "delete"}
"""The model permission each operation needs by default (``app_label.<verb>_<model>``)."""

Rows = Callable[[Context], models.QuerySet[Any]]
RelatedSource = models.QuerySet[Any] | Callable[[Context], models.QuerySet[Any]]
"""A ``related_querysets=`` entry: the rows a foreign key may point at, or a callable building them from the
request's ``Context`` (as ``queryset=`` may be)."""


def claim_answer(ctx: Context | None, using: str) -> None:
    """``ctx.claim_answer(using=...)``, last in a write's transaction (a tool called without a context, as
    a unit test may, has no request to claim)."""
    if ctx is not None:
        ctx.claim_answer(using=using)


def sent(ctx: Context | None, arguments: Mapping[str, Any]) -> set[str]:
    """The arguments the client gave, ``null`` included (``null`` clears a nullable field; an argument left
    out leaves the field as it is). Without a request (a unit test), those that are not ``None``."""
    given = ctx.params.get("arguments") if ctx is not None else None
    if isinstance(given, dict):
        return set(given)
    return {key for key, value in arguments.items() if value is not None}


def validation_message(error: ValidationError, verbose_name: str) -> str:
    """``Invalid book: title: This field cannot be blank.; year: ...`` — one entry per failing field."""
    if hasattr(error, "error_dict"):
        parts = [
            f"{'__all__' if field == '__all__' else field}: {' '.join(messages)}"
            for field, messages in error.message_dict.items()
        ]
    else:
        parts = [f"__all__: {' '.join(error.messages)}"]
    return f"Invalid {verbose_name}: " + "; ".join(parts)


def writable_fields(model: type[models.Model], fields: Sequence[str]) -> dict[str, models.Field[Any, Any]]:
    """The exposed fields a client may set: concrete, editable, on the model itself, not an automatic key."""
    writable: dict[str, models.Field[Any, Any]] = {}
    for path in fields:
        if "__" in path:
            continue
        field: Any = model._meta.get_field(path)
        if not getattr(field, "concrete", False) or not field.editable or field.many_to_many:
            continue
        if isinstance(field, models.AutoField | models.BigAutoField | models.SmallAutoField):
            continue
        writable[path] = field
    return writable


def _required(field: models.Field[Any, Any]) -> bool:
    return not (field.blank or field.null or field.has_default())


def related_sources(
    model: type[models.Model],
    writable: Mapping[str, models.Field[Any, Any]],
    related_querysets: Mapping[str, RelatedSource] | None,
) -> dict[str, RelatedSource]:
    """``related_querysets=`` checked: each key must be a writable foreign key among the exposed fields."""
    sources = dict(related_querysets or {})
    for path in sources:
        field = writable.get(path)
        if field is None or not (field.many_to_one or field.one_to_one):
            raise ImproperlyConfigured(
                f"expose_model({model.__name__}): related_querysets[{path!r}] is not a writable foreign key "
                "among the fields"
            )
    return sources


def _rows_of(source: RelatedSource, ctx: Context | None) -> models.QuerySet[Any]:
    if callable(source) and not isinstance(source, models.QuerySet):
        return source(ctx)  # type: ignore[arg-type]
    return source.all()


@dataclass(frozen=True)
class RowWriter:
    """How a write tool changes one row: only the writable fields, each foreign key only to a row its field
    allows, and the result only if it is still among the tool's rows (``queryset=``)."""

    model: type[models.Model]
    fields: Sequence[str]
    writable: Mapping[str, models.Field[Any, Any]]
    rows: Rows
    related: Mapping[str, RelatedSource]
    item: Any

    @property
    def singular(self) -> str:
        """The model's verbose name, as the tools' messages name it."""
        return str(self.model._meta.verbose_name)

    def assign(self, obj: models.Model, arguments: Mapping[str, Any]) -> None:
        """Set the writable fields given (a foreign key by its key) on ``obj``."""
        for path, field in self.writable.items():
            if path in arguments:
                setattr(obj, field.attname, arguments[path])

    def find(self, ctx: Context, key_name: str, value: Any) -> models.Model:
        """The row of the tool's rows with that key, locked for the write."""
        obj: models.Model | None = self.rows(ctx).select_for_update().filter(**{key_name: value}).first()
        if obj is None:
            raise ToolError(f"No {self.singular} with {key_name} {value!r}")
        return obj

    def refused_targets(self, ctx: Context, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Per foreign key given, its ``related_querysets=`` entry lacking the row named: the same error as
        for a row that does not exist (``full_clean``'s), so that a refusal tells nothing of hidden rows."""
        refused: dict[str, Any] = {}
        for path, source in self.related.items():
            value = arguments.get(path)
            field: Any = self.writable[path]
            target = field.remote_field.field_name
            if value is None or _rows_of(source, ctx).filter(**{target: value}).exists():
                continue
            model_name = field.related_model._meta.verbose_name
            params = {"model": model_name, "pk": value, "field": target, "value": value}
            refused[path] = [ValidationError(field.error_messages["invalid"], code="invalid", params=params)]
        return refused

    def save(self, ctx: Context, obj: models.Model, arguments: Mapping[str, Any]) -> Any:
        """Validate, save and read back ``obj`` (``arguments``: what the client gave); a tool error if it is
        invalid or falls outside the tool's rows (the caller's transaction then rolls back)."""
        errors = self.refused_targets(ctx, arguments)
        try:
            obj.full_clean(exclude=list(errors))
        except ValidationError as exc:
            errors = {**exc.error_dict, **errors}
        if errors:
            raise ToolError(validation_message(ValidationError(errors), self.singular))
        obj.save()
        row = self.rows(ctx).filter(pk=obj.pk).values(*self.fields).first()
        if row is None:
            raise ToolError(
                f"Refused: the {self.singular} would fall outside the rows this tool reaches "
                "(nothing was written)"
            )
        return self.item(**row)


def operation_permissions(
    model: type[models.Model], overrides: Mapping[str, Permission] | None
) -> dict[str, Permission]:
    """Per operation, the permission its tool needs: ``app_label.add_/change_/delete_<model>`` unless
    ``overrides`` (``expose_model``'s ``write_permissions=``) names another (``None``: everyone)."""
    opts = model._meta
    permissions: dict[str, Permission] = {
        operation: f"{opts.app_label}.{_VERBS[operation]}_{opts.model_name}" for operation in WRITE_OPERATIONS
    }
    permissions.update(overrides or {})
    return permissions


@dataclass
class _WriteTools:
    """What the write tools of one model share, and the names of those registered."""

    server: MCPServer
    label: str
    permissions: Mapping[str, Permission]
    writer: RowWriter
    key_name: str
    key_type: Any
    alias: str
    names: list[str]

    def saved(self, ctx: Context, row_of: Callable[[], Any], arguments: dict[str, Any]) -> Any:
        """In one write transaction: the row (``row_of``, new or found), the ``arguments`` assigned, saved
        and claimed; returns the row as the get tool shows it."""
        with write_transaction(self.alias):
            obj = row_of()
            self.writer.assign(obj, arguments)
            row = self.writer.save(ctx, obj, arguments)
            claim_answer(ctx, self.alias)
            return row

    def register(
        self,
        operation: str,
        handler: Callable[..., Any],
        params: list[inspect.Parameter],
        returns: Any,
        description: str,
        annotations: dict[str, bool],
    ) -> None:
        tool_name = f"{self.label}_{operation}"
        self.server.tool(
            name=tool_name,
            description=description,
            annotations={"readOnlyHint": False, **annotations},
            permission=self.permissions[operation],
        )(make_handler(handler, tool_name, params, returns))
        self.names.append(tool_name)


def register_writes(
    server: MCPServer,
    model: type[models.Model],
    *,
    label: str,
    fields: Sequence[str],
    operations: Sequence[str],
    permissions: Mapping[str, Permission],
    key_name: str,
    key_type: Any,
    rows: Rows,
    item: Any,
    related: Mapping[str, RelatedSource] | None = None,
) -> list[str]:
    """Register the write tools named in ``operations`` (in the order create, update, delete); returns their
    names. ``permissions``: per operation (see ``operation_permissions``); ``key_name``, ``key_type``: the
    field update and delete find a row by; ``rows``: the rows they reach; ``item``: a row read back."""
    unknown = set(operations) - set(WRITE_OPERATIONS)
    if unknown:
        raise ImproperlyConfigured(
            f"expose_model({model.__name__}): unknown write operations {sorted(unknown)}"
        )
    alias = router.db_for_write(model)
    writable = writable_fields(model, fields)
    if not writable and {"create", "update"} & set(operations):
        raise ImproperlyConfigured(f"expose_model({model.__name__}): none of the fields can be written")
    writer = RowWriter(model, fields, writable, rows, related_sources(model, writable, related), item)
    tools = _WriteTools(server, label, permissions, writer, key_name, key_type, alias, [])
    for operation in WRITE_OPERATIONS:
        if operation in operations:
            _REGISTER[operation](tools)
    return tools.names


def _register_create(tools: _WriteTools) -> None:
    """``<label>_create``: the writable fields as arguments, required as the model requires them."""
    writer, writable = tools.writer, tools.writer.writable
    params = [
        keyword(path, value_type(field))
        if _required(field)
        else keyword(path, value_type(field) | None, default=None)
        for path, field in writable.items()
    ]

    def create_sync(ctx: Context, arguments: dict[str, Any]) -> Any:
        return tools.saved(ctx, writer.model, arguments)

    async def create_row(**arguments: Any) -> Any:
        ctx: Context = arguments.pop("ctx")
        names = sent(ctx, arguments) & writable.keys()
        given = {k: v for k, v in arguments.items() if k in names}
        return await call_handler(create_sync, ctx, given)

    tools.register(
        "create",
        create_row,
        [*params, ctx_parameter()],
        writer.item,
        f"Create a {writer.singular}; returns it as {tools.label}_get does.",
        {"destructiveHint": False, "idempotentHint": False},
    )


def _register_update(tools: _WriteTools) -> None:
    """``<label>_update``: the key, then each writable field as an optional argument (only those given are
    set; the key finds the row and is not changed)."""
    writer, key_name = tools.writer, tools.key_name
    writable = writer.writable
    params = [
        keyword(path, value_type(field) | None, default=None)
        for path, field in writable.items()
        if path != key_name
    ]

    def update_sync(ctx: Context, value: Any, arguments: dict[str, Any]) -> Any:
        return tools.saved(ctx, lambda: writer.find(ctx, key_name, value), arguments)

    async def update_row(**arguments: Any) -> Any:
        ctx: Context = arguments.pop("ctx")
        value = arguments.pop(key_name)
        changes = {
            k: v
            for k, v in arguments.items()
            if k in sent(ctx, arguments) and k in writable and k != key_name
        }
        return await call_handler(update_sync, ctx, value, changes)

    tools.register(
        "update",
        update_row,
        [keyword(key_name, tools.key_type), *params, ctx_parameter()],
        writer.item,
        f"Change a {writer.singular} found by its {key_name}: only the fields given are set.",
        {"destructiveHint": True, "idempotentHint": True},
    )


def _register_delete(tools: _WriteTools) -> None:
    """``<label>_delete``: the key; a row other rows protect (``on_delete=PROTECT``) is refused."""
    writer, alias, key_name = tools.writer, tools.alias, tools.key_name
    singular = writer.singular  # as registered, like the description

    def delete_sync(ctx: Context, value: Any) -> dict[str, Any]:
        with write_transaction(alias):
            obj = writer.find(ctx, key_name, value)
            try:
                obj.delete()
            except models.ProtectedError as exc:
                raise ToolError(f"Cannot delete this {singular}: other rows refer to it") from exc
            claim_answer(ctx, alias)
        return {"deleted": value}

    async def delete_row(**arguments: Any) -> dict[str, Any]:
        deleted: dict[str, Any] = await call_handler(delete_sync, arguments["ctx"], arguments[key_name])
        return deleted

    tools.register(
        "delete",
        delete_row,
        [keyword(key_name, tools.key_type), ctx_parameter()],
        dict[str, Any],
        f"Delete a {singular} found by its {key_name}.",
        {"destructiveHint": True, "idempotentHint": True},
    )


_REGISTER: dict[str, Callable[[_WriteTools], None]] = {
    "create": _register_create,
    "update": _register_update,
    "delete": _register_delete,
}
