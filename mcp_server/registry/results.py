"""Turns what a handler returns into MCP content blocks, and derives output schemas from return types."""

from __future__ import annotations

import base64
import dataclasses
import inspect
import json
import mimetypes
import types
import typing
from pathlib import Path
from typing import Any, Union

import mcp_types as mt
from pydantic import BaseModel, TypeAdapter
from typing_extensions import is_typeddict

__all__ = ["Audio", "Image", "dump", "output_schema_for", "to_content", "to_json_text"]

CONTENT_TYPES = (mt.TextContent, mt.ImageContent, mt.AudioContent, mt.EmbeddedResource, mt.ResourceLink)


class _Media:
    """Binary media given as bytes or a file path; becomes an image or audio content block."""

    kind: str = ""
    default_mime = "application/octet-stream"

    def __init__(
        self, data: bytes | None = None, *, path: str | Path | None = None, mime_type: str | None = None
    ):
        if (data is None) == (path is None):
            raise ValueError(f"{type(self).__name__} takes either data or path")
        if path is not None:
            data = Path(path).read_bytes()
            mime_type = mime_type or mimetypes.guess_type(str(path))[0]
        assert data is not None
        self.data = data
        self.mime_type = mime_type or self.default_mime

    def to_block(self) -> dict[str, Any]:
        return {"type": self.kind, "data": base64.b64encode(self.data).decode(), "mimeType": self.mime_type}


class Image(_Media):
    """An image result: ``Image(png_bytes, mime_type="image/png")`` or ``Image(path="chart.png")``."""

    kind = "image"
    default_mime = "image/png"


class Audio(_Media):
    """An audio result: ``Audio(wav_bytes, mime_type="audio/wav")`` or ``Audio(path="clip.wav")``."""

    kind = "audio"
    default_mime = "audio/wav"


def dump(model: BaseModel) -> dict[str, Any]:
    """Wire form of an ``mcp-types`` model."""
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return TypeAdapter(type(value)).dump_python(value, mode="json")
    return TypeAdapter(Any).dump_python(value, mode="json")


def to_json_text(value: Any) -> str:
    """A JSON text copy of any value pydantic can serialise."""
    return json.dumps(_jsonable(value), ensure_ascii=False)


def _block(value: Any) -> dict[str, Any] | None:
    if isinstance(value, CONTENT_TYPES):
        return dump(value)
    if isinstance(value, _Media):
        return value.to_block()
    if isinstance(value, dict) and value.get("type") in {
        "text",
        "image",
        "audio",
        "resource",
        "resource_link",
    }:
        return value
    return None


def to_content(value: Any) -> list[dict[str, Any]]:
    """Content blocks for a handler's return value (``None`` gives no blocks)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    block = _block(value)
    if block is not None:
        return [block]
    if isinstance(value, list | tuple):
        blocks = [_block(item) for item in value]
        if value and all(b is not None for b in blocks):
            return typing.cast(list[dict[str, Any]], blocks)
    return [{"type": "text", "text": to_json_text(value)}]


def _is_structured(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _is_structured(typing.get_args(annotation)[0])
    if annotation in (None, type(None), Any, typing.Any) or annotation is Any:
        return False
    if origin in (Union, types.UnionType):
        return all(_is_structured(a) for a in typing.get_args(annotation) if a is not type(None))
    if isinstance(annotation, type) and issubclass(annotation, (*CONTENT_TYPES, _Media, mt.CallToolResult)):
        return False
    is_content = (
        isinstance(a, type) and issubclass(a, (*CONTENT_TYPES, _Media)) for a in typing.get_args(annotation)
    )
    return not (origin in (list, tuple) and any(is_content))


def _is_object_type(annotation: Any) -> bool:
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if isinstance(annotation, type) and (
        issubclass(annotation, BaseModel) or dataclasses.is_dataclass(annotation) or is_typeddict(annotation)
    ):
        return True
    return typing.get_origin(annotation) is dict or annotation is dict


def output_schema_for(annotation: Any) -> tuple[dict[str, Any] | None, bool]:
    """``(schema, wrapped)`` for a return annotation; ``wrapped`` means results go under ``"result"``."""
    if annotation is inspect.Signature.empty or not _is_structured(annotation):
        return None, False
    schema = TypeAdapter(annotation).json_schema(mode="serialization")
    if _is_object_type(annotation) and schema.get("type") == "object":
        schema.pop("title", None)
        return schema, False
    defs = schema.pop("$defs", None)
    wrapped: dict[str, Any] = {"type": "object", "properties": {"result": schema}, "required": ["result"]}
    if defs:
        wrapped["$defs"] = defs
    return wrapped, True
