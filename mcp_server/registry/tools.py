"""Tools: a definition for ``tools/list`` and a call that always produces a ``CallToolResult``."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import mcp_types as mt
from pydantic import ValidationError

from ..conf import mcp_settings
from ..wire.errors import JSONRPCError, ToolError
from ..wire.v2026_07_28 import header_params, invalid_x_mcp_header
from .apps import check_visibility
from .entries import RegisteredHandler
from .results import _jsonable, dump, output_schema_for, to_content

__all__ = ["Tool"]

logger = logging.getLogger("mcp_server.tools")


def _validation_message(exc: ValidationError) -> str:
    parts = [f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors()]
    return "; ".join(parts)


@dataclass
class Tool(RegisteredHandler):
    """A registered tool."""

    annotations: dict[str, Any] | None = None
    timeout: float | None = None
    structured_output: bool | None = None
    input_schema: dict[str, Any] | None = None
    task: str | None = None
    """2026-07-28 tasks extension: ``"optional"`` (a call declaring the extension is answered with a task,
    one without it runs synchronously), ``"required"`` (a call without it is refused -32021) or ``None``."""
    task_start: str = "immediate"
    """``"immediate"``: the whole handler runs as the task. ``"detach"``: the handler starts inside the
    call (input rounds are answered ``input_required`` there) and goes on as a task at ``ctx.detach()``."""
    output_schema: dict[str, Any] | None = None
    """Derived from the return annotation unless given (an object schema: results are not wrapped)."""
    ui_resource: str | None = None
    """MCP Apps: the ``ui://`` URI of the tool's view (``_meta.ui.resourceUri``; set by ``app=``)."""
    visibility: list[str] | None = None
    """MCP Apps ``_meta.ui.visibility``: ``["model", "app"]`` (the default when ``None``), ``["model"]`` or
    ``["app"]`` (callable by views, not listed to clients without the extension)."""
    wrap_result: bool = field(init=False, default=False)
    header_schema: dict[str, Any] = field(init=False, default_factory=dict)
    """The ``inputSchema`` as listed, read for ``Mcp-Param-*`` headers (``x-mcp-header``) at 2026-07-28."""
    header_params: dict[str, tuple[str, ...]] = field(init=False, default_factory=dict)
    """Its ``x-mcp-header`` annotations, ``{lower-case header name: argument path}``, read once."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._stamp_ui()
        if self.task not in (None, "optional", "required"):
            raise TypeError(f"tool {self.name!r}: task must be None, 'optional' or 'required'")
        if self.task_start not in ("immediate", "detach"):
            raise TypeError(f"tool {self.name!r}: task_start must be 'immediate' or 'detach'")
        if self.input_schema is not None and self.input_schema.get("type") != "object":
            raise TypeError(f"tool {self.name!r}: input_schema must be a JSON Schema with type 'object'")
        self.header_schema = self.definition()["inputSchema"]
        problem = invalid_x_mcp_header(self.header_schema)
        if problem is not None:
            raise TypeError(f"tool {self.name!r}: {problem}")
        self.header_params = header_params(self.header_schema)
        if self.output_schema is not None:
            if self.output_schema.get("type") != "object":
                raise TypeError(f"tool {self.name!r}: output_schema must be a JSON Schema with type 'object'")
        elif self.structured_output is not False:
            self.output_schema, self.wrap_result = output_schema_for(self.signature.return_annotation)
            if self.structured_output and self.output_schema is None:
                raise TypeError(f"tool {self.name!r}: structured_output=True needs a structured return type")

    def takes_free_arguments(self) -> bool:
        return self.input_schema is not None

    def _stamp_ui(self) -> None:
        self.visibility = check_visibility(self.visibility, f"tool {self.name!r}")
        if self.ui_resource is None and self.visibility is None:
            return
        if self.meta and "ui" in self.meta:
            raise TypeError(f"tool {self.name!r}: app= and visibility= set _meta['ui']; meta must not")
        ui: dict[str, Any] = {}
        if self.ui_resource is not None:
            ui["resourceUri"] = self.ui_resource
        if self.visibility is not None:
            ui["visibility"] = list(self.visibility)
        self.meta = {**(self.meta or {}), "ui": ui}

    @property
    def app_only(self) -> bool:
        """Whether only views may call the tool (``visibility=["app"]``): it is listed only to clients that
        declared MCP Apps, whose host keeps it from the model."""
        return self.visibility is not None and "model" not in self.visibility

    def definition(self) -> dict[str, Any]:
        """The tool as listed by ``tools/list``."""
        out = self.base_definition()
        out["inputSchema"] = (
            self.input_schema if self.input_schema is not None else self.signature.input_schema()
        )
        if self.output_schema is not None:
            out["outputSchema"] = self.output_schema
        if self.annotations:
            out["annotations"] = self.annotations
        return out

    def _error(self, message: str) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": message}], "isError": True}

    async def call(self, arguments: dict[str, Any] | None, context: Any) -> dict[str, Any]:
        """Run the tool. Bad arguments and failures inside the tool become ``isError`` results."""
        try:
            kwargs = self.signature.bind(arguments, context)
        except ValidationError as exc:
            return self._error(f"Invalid arguments for tool {self.name}: {_validation_message(exc)}")
        try:
            value = await self.run(kwargs)
        except (ToolError, JSONRPCError) as exc:
            if isinstance(exc, JSONRPCError):
                raise
            return self._error(str(exc))
        except Exception as exc:
            logger.exception("Tool %s raised", self.name)
            # Its text is the server's (a database error, a RecursionError), not the tool author's message to
            # the caller (a ToolError): it reaches the client only when ERROR_DETAIL asks for it.
            detail = f"{type(exc).__name__}: {exc}" if mcp_settings.ERROR_DETAIL else "internal error"
            return self._error(f"Error executing tool {self.name}: {detail}")
        return self.to_result(value)

    def to_result(self, value: Any) -> dict[str, Any]:
        """A ``CallToolResult`` for a returned value; ``None`` is a result with empty content."""
        if isinstance(value, mt.CallToolResult):
            return dump(value)
        result: dict[str, Any] = {"content": to_content(value)}
        if self.output_schema is not None and value is not None:
            structured = _jsonable(value)
            result["structuredContent"] = {"result": structured} if self.wrap_result else structured
        return result
