"""Django model fields as the Python types the tools' schemas are made from, shared by the model tools (read
and write) and the form tools."""

from __future__ import annotations

import datetime
import decimal
import uuid
from typing import Any, Literal

from django.core.exceptions import FieldDoesNotExist, ImproperlyConfigured
from django.db import models

__all__ = ["path_type", "python_type", "value_type"]

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


def python_type(field: models.Field[Any, Any]) -> Any:
    """The Python type of the field's values (``str`` for any field not listed above)."""
    for field_class, field_type in _TYPES:
        if isinstance(field, field_class):
            return field_type
    return str


def path_type(model: type[models.Model], path: str) -> tuple[Any, bool]:
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
                return python_type(current._meta.pk), nullable
        elif index < len(parts) - 1:
            raise ImproperlyConfigured(f"expose_model({model.__name__}): {part!r} in {path!r} is no relation")
        else:
            return python_type(field), nullable
    raise ImproperlyConfigured(f"expose_model({model.__name__}): empty field path")


def value_type(field: models.Field[Any, Any]) -> Any:
    """What a client may set ``field`` to: a foreign key takes its target's key, choices are a ``Literal``,
    and a nullable field also takes ``None``."""
    target: Any = field.target_field if field.is_relation else field  # type: ignore[attr-defined]
    base = python_type(target)
    if field.choices:
        base = Literal[tuple(value for value, _label in field.flatchoices)]
    return base | None if field.null else base
