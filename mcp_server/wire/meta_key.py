"""The part of a ``tools/call`` ``_meta`` that the revision's schema reads, for remembering a verdict on it.

A ``_meta`` is an open object: the schema types a few keys (``progressToken``, and at 2026-07-28 the
``io.modelcontextprotocol/…`` envelope) and keeps every other one as it is, unread (``extra="allow"``,
with no validator and no schema for the extras). A client that puts something of its own in each request
(a ``traceparent``, a request id) sends a different ``_meta`` every time, yet the schema's verdict on it is
the one it gave the typed keys. And a key whose type accepts every value of some types (``progressToken``:
``str | int | None``, no constraint) gives one verdict for each of those values.

:func:`schema_part` is what is left of a ``_meta`` once both are set aside: the typed keys alone, each value
of a type its key accepts whole replaced by one value of that type. Both facts are read from the
``mcp-types`` models (:func:`typed_keys`); where a model does not look as expected, the ``_meta`` is kept
whole (``None``), as before.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from mcp_types.methods import CLIENT_REQUESTS
from pydantic import BaseModel
from pydantic.fields import FieldInfo

__all__ = ["schema_part", "typed_keys"]

_STAND_INS: dict[type, object] = {str: "", int: 0}
"""One value of each type a key can accept whole (a ``bool`` is no ``int`` here: ``type`` is compared)."""


def schema_part(meta: dict[str, Any], version: str) -> dict[str, Any]:
    """``meta`` with what the schema of ``tools/call`` at ``version`` does not read set aside (see the
    module); ``meta`` itself when the schema is not one this understands."""
    typed = typed_keys(version)
    if typed is None:
        return meta
    part: dict[str, Any] = {}
    for key, value in meta.items():
        accepted = typed.get(key)
        if accepted is None:  # an extra: kept unread
            continue
        part[key] = _STAND_INS[type(value)] if type(value) in accepted else value
    return part


@lru_cache(maxsize=16)
def typed_keys(version: str) -> Mapping[str, frozenset[type]] | None:
    """The ``_meta`` keys the ``tools/call`` schema at ``version`` types, each to the types of which it
    accepts every value (empty: it must be validated); ``None`` when the schema's ``_meta`` is not an open
    model of plain fields (it is then read whole)."""
    request = CLIENT_REQUESTS.get(("tools/call", version))
    if request is None:
        return None
    params = _one_model(request.model_fields["params"].annotation)
    field = params.model_fields.get("meta") if params is not None else None
    meta = _one_model(field.annotation) if field is not None and field.alias == "_meta" else None
    if meta is None or meta.model_config.get("extra") != "allow" or _has_hooks(meta):
        return None
    return MappingProxyType(
        {(info.alias or name): _accepted_whole(info) for name, info in meta.model_fields.items()}
    )


def _one_model(annotation: Any) -> type[BaseModel] | None:
    """The one pydantic model of ``annotation`` (``Model`` or ``Model | None``), else ``None``."""
    members = typing.get_args(annotation) if _is_union(annotation) else (annotation,)
    models = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]
    others = [m for m in members if m is not type(None) and m not in models]
    return models[0] if len(models) == 1 and not others else None


def _accepted_whole(info: FieldInfo) -> frozenset[type]:
    """Of ``str`` and ``int``, the types of which the field accepts every value: a plain type, or a bare
    union of them, with no constraint (``Annotated`` metadata: a length, a pattern, strictness)."""
    if info.metadata:
        return frozenset()
    annotation = info.annotation
    members = typing.get_args(annotation) if _is_union(annotation) else (annotation,)
    return frozenset(m for m in members if m in _STAND_INS)


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def _has_hooks(model: type[BaseModel]) -> bool:
    """Whether ``model`` validates more than its fields: a validator, or a schema for its extras."""
    decorators = model.__pydantic_decorators__
    hooks = (
        decorators.model_validators,
        decorators.field_validators,
        decorators.validators,
        decorators.root_validators,
    )
    return any(hooks) or "__pydantic_extra__" in getattr(model, "__annotations__", {})
