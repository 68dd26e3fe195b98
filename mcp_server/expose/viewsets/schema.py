"""JSON Schemas (2020-12) of a viewset's tools, from DRF's own OpenAPI mapping of its serializer.

``rest_framework.schemas.openapi.AutoSchema`` maps each serializer field (required, ``readOnly``,
``writeOnly``, choices as ``enum``, nested serializers, min/max, lengths, formats and patterns from
validators). What OpenAPI 3.0 says differently is converted here: ``nullable: true`` becomes a ``type`` list
with ``"null"`` (and ``null`` in an ``enum``), ``example`` is dropped, read-only fields leave the input
schemas and write-only ones the output schemas. Fields whose value DRF cannot know (``ReadOnlyField``,
``SerializerMethodField``, ``JSONField``) accept any value in output schemas, so that the official client's
validation of ``structuredContent`` never refuses a correct answer.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

from rest_framework import serializers
from rest_framework.schemas.openapi import AutoSchema
from rest_framework.utils.encoders import JSONEncoder

__all__ = [
    "ToolSchema",
    "input_schema",
    "list_output_schema",
    "object_schema",
    "output_schema",
    "to_json_schema",
]

Schema = dict[str, Any]

_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


class ToolSchema(AutoSchema):  # type: ignore[misc]
    """DRF's field mapping, with the few cases where its guess is narrower than the values made."""

    def map_field(self, field: Any) -> Schema:
        if isinstance(field, serializers.SerializerMethodField | serializers.ReadOnlyField):
            return {}  # any value: a method's result, or an attribute of unknown type
        if isinstance(field, serializers.JSONField):
            return {}
        if isinstance(field, serializers.PrimaryKeyRelatedField) and not getattr(field, "pk_field", None):
            model = getattr(field.queryset, "model", None)
            if model is not None:
                pk = model._meta.pk
                internal = pk.target_field if pk.is_relation else pk
                if internal.get_internal_type().endswith(("AutoField", "IntegerField")):
                    return {"type": "integer"}
        result: Schema = super().map_field(field)
        return result


def to_json_schema(node: Any) -> Any:
    """An OpenAPI 3.0 schema as JSON Schema 2020-12 (a new object; the input is left alone)."""
    if isinstance(node, list):
        return [to_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    schema = {key: value for key, value in node.items() if key not in ("nullable", "example")}
    if isinstance(schema.get("properties"), dict):
        schema["properties"] = {name: to_json_schema(sub) for name, sub in schema["properties"].items()}
    for key in ("items", "additionalProperties", "not"):
        if isinstance(schema.get(key), dict):
            schema[key] = to_json_schema(schema[key])
    for key in _SUBSCHEMA_LISTS:
        if isinstance(schema.get(key), list):
            schema[key] = [to_json_schema(sub) for sub in schema[key]]
    if isinstance(schema.get("pattern"), str):
        # DRF writes Python's \Z as \z (PCRE); ECMA-262, JSON Schema's dialect, knows neither: $ is the end.
        schema["pattern"] = schema["pattern"].replace("\\z", "$")
    if isinstance(schema.get("multipleOf"), float):
        schema.pop("multipleOf")  # 0.01 as a float refuses 0.07 (7.000000000000001 is no integer)
    if node.get("nullable"):
        kind = schema.get("type")
        if isinstance(kind, str):
            schema["type"] = [kind, "null"]
        elif isinstance(kind, list) and "null" not in kind:
            schema["type"] = [*kind, "null"]
        if isinstance(schema.get("enum"), list) and None not in schema["enum"]:
            schema["enum"] = [*schema["enum"], None]
    return schema


def _jsonable(schema: Schema) -> Schema:
    """Defaults and choices may be Decimals, dates or lazy strings: encode them as DRF's renderer would."""
    result: Schema = json.loads(json.dumps(schema, cls=JSONEncoder))
    return result


def _per_field(serializer: Any, schema: Schema) -> None:
    """What DRF's mapping leaves out: a ``ChoiceField(allow_blank=True)`` also takes (and gives) ``""``, and a
    default is written as the field represents it (a Decimal default of a DecimalField as ``"1.50"``)."""
    for name, field in serializer.fields.items():
        prop = schema.get("properties", {}).get(name)
        if prop is None:
            continue
        if isinstance(field, serializers.ChoiceField) and getattr(field, "allow_blank", False):
            enum = prop.get("enum")
            if isinstance(enum, list) and "" not in enum:
                prop["enum"] = [*enum, ""]
        if "default" in prop:
            try:
                prop["default"] = field.to_representation(field.default)
            except Exception:
                del prop["default"]
        if isinstance(field, serializers.Serializer):
            _per_field(field, prop)
        elif isinstance(field, serializers.ListSerializer) and isinstance(prop.get("items"), dict):
            _per_field(field.child, prop["items"])


def object_schema(serializer: Any) -> Schema:
    """The serializer as one JSON Schema object, both directions (``readOnly``/``writeOnly`` kept)."""
    mapped = ToolSchema().map_serializer(serializer)
    _per_field(serializer, mapped)
    return _jsonable(to_json_schema(mapped))


def _objects(node: Any) -> Iterator[dict[str, Any]]:
    """Each object schema (with ``properties``) in ``node``, outer first, through properties and items."""
    if not isinstance(node, dict):
        return
    props = node.get("properties")
    if isinstance(props, dict):
        yield node
        for sub in list(props.values()):
            yield from _objects(sub)
    yield from _objects(node.get("items"))


def _strip(schema: Schema, flag: str) -> Schema:
    """Drop the properties marked ``flag`` (``readOnly`` or ``writeOnly``), at every level."""
    out = copy.deepcopy(schema)
    for node in _objects(out):
        props = node["properties"]
        dropped = [name for name, sub in props.items() if isinstance(sub, dict) and sub.get(flag)]
        for name in dropped:
            del props[name]
        if "required" in node:
            node["required"] = [name for name in node["required"] if name not in dropped]
            if not node["required"]:
                del node["required"]
    return out


def input_schema(serializer: Any) -> Schema:
    """What a client may send: the serializer's writable fields; required as DRF requires them."""
    schema = _strip(object_schema(serializer), "readOnly")
    schema["type"] = "object"
    return schema


def output_schema(serializer: Any) -> Schema:
    """What the serializer gives: its readable fields, all of them always present."""
    schema = _strip(object_schema(serializer), "writeOnly")
    for node in _objects(schema):
        if node["properties"]:
            node["required"] = list(node["properties"])
    return schema


def list_output_schema(item: Schema, paginator: Any) -> Schema:
    """``{"items": [...]}`` for an unpaginated list, else the paginator's own response schema."""
    items = {"type": "array", "items": item}
    if paginator is None:
        return {"type": "object", "properties": {"items": items}, "required": ["items"]}
    paged: Schema = to_json_schema(paginator.get_paginated_response_schema(items))
    paged.setdefault("type", "object")
    return _jsonable(paged)
