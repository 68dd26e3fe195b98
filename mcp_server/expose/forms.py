"""A Django ``Form`` or ``ModelForm`` as a tool's input.

::

    from mcp_server import expose_form, mcp

    expose_form(mcp, AuthorForm, name="author_create")          # a ModelForm: saves, returns the row
    expose_form(mcp, ContactForm, name="contact", handler=send)  # a Form: send(form, ctx) once it is valid

The form's fields give the input schema (JSON types, required, choices as ``enum``, ``maxLength``,
``minimum``/``maximum``); each call builds the form from the arguments, runs ``is_valid()`` in a worker thread
and, when it fails, returns a tool error naming each failing field (``__all__`` for the form's own ``clean``).
A ``ModelForm`` tool then saves inside ``transaction.atomic`` and returns the saved row's key and fields;
a ``Form`` tool calls ``handler(form, ctx)`` (sync, in the worker thread; or async) and returns its result.
"""

from __future__ import annotations

import datetime
import decimal
import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

from django import forms
from django.core.exceptions import ImproperlyConfigured
from django.db import router
from pydantic import Field

from ..core.context import Context
from ..core.writes import write_transaction
from ..registry.entries import Permission
from ..registry.server import MCPServer
from ..registry.signature import call_handler
from ..wire.errors import ToolError
from .fields import python_type
from .schema import DEFAULT_PERMISSION, ctx_parameter, keyword, make_handler
from .writes import claim_answer

__all__ = ["expose_form", "form_errors_message"]

FormHandler = Callable[[Any, Context], Any]

_SCALARS: list[tuple[type[forms.Field], Any]] = [
    (forms.NullBooleanField, bool | None),
    (forms.BooleanField, bool),
    (forms.IntegerField, int),
    (forms.FloatField, float),
    (forms.DecimalField, decimal.Decimal),
    (forms.DateTimeField, datetime.datetime),
    (forms.DateField, datetime.date),
    (forms.TimeField, datetime.time),
    (forms.DurationField, datetime.timedelta),
    (forms.JSONField, Any),
]


def form_errors_message(form: forms.BaseForm) -> str:
    """``Invalid input: name: This field is required.; __all__: ...`` — one entry per failing field."""
    parts = [f"{field}: {' '.join(str(m) for m in messages)}" for field, messages in form.errors.items()]
    return "Invalid input: " + "; ".join(parts)


def _choice_values(field: forms.ChoiceField) -> tuple[Any, ...]:
    values: list[Any] = []
    choices: Any = field.choices
    for value, label in choices:
        if isinstance(label, list | tuple):  # an optgroup
            values += [v for v, _label in label]
        else:
            values.append(value)
    return tuple(v for v in values if v not in ("", None))


def _annotation(field: forms.Field) -> Any:
    """The Python type (with pydantic constraints) the JSON schema of ``field`` is made from."""
    if isinstance(field, forms.ModelChoiceField):
        queryset: Any = field.queryset
        key_type = python_type(queryset.model._meta.pk)
        return list[key_type] if isinstance(field, forms.ModelMultipleChoiceField) else key_type  # type: ignore[valid-type]
    if isinstance(field, forms.MultipleChoiceField):
        values = _choice_values(field)
        return list[Literal[values]] if values else list[str]  # type: ignore[valid-type]
    if isinstance(field, forms.ChoiceField):
        values = _choice_values(field)
        return Literal[values] if values else str
    for field_class, scalar_type in _SCALARS:
        if isinstance(field, field_class):
            if isinstance(field, forms.IntegerField | forms.FloatField | forms.DecimalField):
                bounds: dict[str, Any] = {
                    k: v for k, v in {"ge": field.min_value, "le": field.max_value}.items() if v is not None
                }
                return Annotated[scalar_type, Field(**bounds)] if bounds else scalar_type
            return scalar_type
    if isinstance(field, forms.CharField):
        lengths: dict[str, Any] = {
            k: v
            for k, v in {"max_length": field.max_length, "min_length": field.min_length}.items()
            if v is not None
        }
        return Annotated[str, Field(**lengths)] if lengths else str
    return str


def _parameters(form_class: type[forms.BaseForm]) -> list[inspect.Parameter]:
    params = []
    base_fields: dict[str, forms.Field] = getattr(form_class, "base_fields")  # noqa: B009
    for field_name, field in base_fields.items():
        annotation = _annotation(field)
        if field.required and not isinstance(field, forms.NullBooleanField):
            params.append(keyword(field_name, annotation))
        else:
            params.append(keyword(field_name, annotation | None, default=None))
    return [*params, ctx_parameter()]


def _model_form_run(
    form_class: type[forms.BaseForm], model: Any, handler: FormHandler | None
) -> Callable[[dict[str, Any], Context], Any]:
    """A ``ModelForm`` tool's work, in the worker thread: validate, then save (or ``handler(form, ctx)``) and
    claim the answer, all in one transaction; the result is the saved row's key and fields."""
    field_names = list(getattr(form_class, "base_fields"))  # noqa: B009
    answered = [f for f in field_names if _is_model_field(model, f)]
    model_fields = [model._meta.pk, *(model._meta.get_field(f) for f in answered)]

    def saved(obj: Any) -> dict[str, Any]:
        # The instance ``form.save()`` returned, as ``values()`` would read it back: by field name, a foreign
        # key as its target's key (one query fewer per call than reading the row again).
        return {field.name: field.value_from_object(obj) for field in model_fields}

    def run(arguments: dict[str, Any], ctx: Context) -> Any:
        form = form_class(data=arguments)
        alias = router.db_for_write(model)
        with write_transaction(alias):
            if not form.is_valid():
                raise ToolError(form_errors_message(form))
            result = handler(form, ctx) if handler is not None else saved(form.save())  # type: ignore[attr-defined]
            claim_answer(ctx, alias)
            return result

    return run


def _form_run(
    form_class: type[forms.BaseForm], handler: FormHandler
) -> Callable[[dict[str, Any], Context], Any]:
    """A plain ``Form`` tool's work, in the worker thread: validate, then ``handler(form, ctx)``."""

    def run(arguments: dict[str, Any], ctx: Context) -> Any:
        form = form_class(data=arguments)
        if not form.is_valid():
            raise ToolError(form_errors_message(form))
        return handler(form, ctx)

    return run


def expose_form(
    server: MCPServer,
    form_class: type[forms.BaseForm],
    *,
    name: str,
    handler: FormHandler | None = None,
    description: str | None = None,
    permission: Permission = DEFAULT_PERMISSION,
    annotations: Mapping[str, bool] | None = None,
) -> str:
    """Register the tool ``name`` taking ``form_class``'s fields; returns its name.

    A ``ModelForm`` without ``handler`` saves the new row in a transaction and returns its key and fields;
    with ``handler``, ``handler(form, ctx)`` runs inside the transaction instead and its result is returned.
    A plain ``Form`` needs ``handler``. ``permission``: for a ``ModelForm``, ``app_label.add_<model>`` by
    default; for a ``Form``, none by default. ``description``: default the form's docstring.
    """
    is_model_form = issubclass(form_class, forms.BaseModelForm)
    if handler is None and not is_model_form:
        raise ImproperlyConfigured(f"expose_form({form_class.__name__}): a plain Form needs handler=")
    if is_model_form and inspect.iscoroutinefunction(handler):
        raise ImproperlyConfigured(
            f"expose_form({form_class.__name__}): a ModelForm's handler runs in the transaction: sync only"
        )
    model: Any = form_class._meta.model if is_model_form else None  # type: ignore[attr-defined]
    if permission is DEFAULT_PERMISSION:
        permission = f"{model._meta.app_label}.add_{model._meta.model_name}" if is_model_form else None
    if is_model_form:
        run = _model_form_run(form_class, model, handler)
    else:
        assert handler is not None
        run = _form_run(form_class, handler)

    async def call(**arguments: Any) -> Any:
        ctx: Context = arguments.pop("ctx")
        data = {k: v for k, v in arguments.items() if v is not None}
        result = await call_handler(run, data, ctx)
        if inspect.isawaitable(result):
            result = await result
        return result

    server.tool(
        name=name,
        description=description or inspect.getdoc(form_class) or f"Submit {form_class.__name__}.",
        annotations={"readOnlyHint": False, **(annotations or {})},
        permission=permission,
    )(make_handler(call, name, _parameters(form_class), _returns(handler)))
    return name


def _returns(handler: FormHandler | None) -> Any:
    """The tool's result type: the saved row for a ModelForm, else the handler's return annotation."""
    if handler is None:
        return dict[str, Any]
    try:
        return typing.get_type_hints(handler).get("return", Any)
    except (NameError, TypeError):
        return Any


def _is_model_field(model: Any, field_name: str) -> bool:
    try:
        field = model._meta.get_field(field_name)
    except Exception:
        return False
    return bool(getattr(field, "concrete", False)) and not field.many_to_many
