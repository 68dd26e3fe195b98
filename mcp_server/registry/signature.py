"""Reads a handler's signature: which parameter takes the Context, and a pydantic model for the rest."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo

from ..wire.jsonrpc import lone_surrogate_at

__all__ = ["HandlerSignature", "McpHeader", "call_handler"]


def McpHeader(name: str) -> FieldInfo:
    """Mark a tool parameter as mirrored into the ``Mcp-Param-<name>`` HTTP header (``x-mcp-header``).

    Only on string, integer or boolean parameters; the tool's registration refuses anything else."""
    info: FieldInfo = Field(json_schema_extra={"x-mcp-header": name})
    return info


def _is_context(annotation: Any) -> bool:
    from ..core.context import Context

    return inspect.isclass(annotation) and issubclass(annotation, Context)


class HandlerSignature:
    """The arguments model of a handler and the name of its Context parameter, if any."""

    def __init__(self, fn: Callable[..., Any], *, model_name: str, free_arguments: bool = False) -> None:
        """``free_arguments``: a ``**kwargs`` parameter is allowed and receives, unvalidated, every argument
        the signature does not name (a tool with an explicit ``input_schema`` that validates them itself)."""
        self.fn = fn
        self.is_async = inspect.iscoroutinefunction(fn)
        hints = typing.get_type_hints(fn, include_extras=True)
        self.return_annotation: Any = hints.get("return", inspect.Signature.empty)
        self.context_param: str | None = None
        self.free_arguments = False
        definitions: dict[str, Any] = {}
        for name, param in inspect.signature(fn).parameters.items():
            if param.kind is param.VAR_KEYWORD and free_arguments:
                self.free_arguments = True
                continue
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(
                    f"{fn.__qualname__}: *args and **kwargs cannot be described by a schema "
                    "(a tool registered with an explicit input_schema may take **kwargs)"
                )
            annotation = hints.get(name, Any)
            if _is_context(annotation):
                self.context_param = name
                continue
            default = ... if param.default is inspect.Parameter.empty else param.default
            definitions[name] = (annotation, default)
        self.model: type[BaseModel] = create_model(
            model_name,
            __config__=ConfigDict(arbitrary_types_allowed=True, extra="forbid"),
            **definitions,
        )
        self.parameter_names = tuple(definitions)

    def input_schema(self) -> dict[str, Any]:
        """JSON Schema of the arguments, always ``type: object``."""
        schema = self.model.model_json_schema()
        schema.pop("title", None)
        schema.setdefault("properties", {})
        return schema

    def bind(self, arguments: dict[str, Any] | None, context: Any) -> dict[str, Any]:
        """Validate ``arguments`` and return keyword arguments; raises ``pydantic.ValidationError``."""
        arguments = arguments or {}
        where = lone_surrogate_at(arguments)
        if where is not None:  # valid in the request's JSON, but no text: what a str parameter never gets
            error = {"type": "string_unicode", "loc": where, "input": "<a lone UTF-16 surrogate>"}
            raise ValidationError.from_exception_data(self.model.__name__, [error])  # type: ignore[list-item]
        free: dict[str, Any] = {}
        if self.free_arguments:
            free = {k: v for k, v in arguments.items() if k not in self.parameter_names}
            arguments = {k: v for k, v in arguments.items() if k in self.parameter_names}
        validated = self.model.model_validate(arguments)
        kwargs = {**free, **{name: getattr(validated, name) for name in self.parameter_names}}
        if self.context_param is not None:
            kwargs[self.context_param] = context
        return kwargs


def _run_sync(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    close_old_connections()
    try:
        return fn(*args, **kwargs)
    finally:
        close_old_connections()


async def call_handler(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """Await an async handler, or run a sync one in a worker thread so the event loop never blocks."""
    if inspect.iscoroutinefunction(fn):
        awaitable: Awaitable[Any] = fn(*args, **kwargs)
        return await awaitable
    return await sync_to_async(_run_sync, thread_sensitive=False)(fn, args, kwargs)
