"""Prompts: arguments from the handler's signature, messages from what it returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mcp_types as mt
from pydantic import BaseModel, ValidationError

from ..wire.errors import INVALID_PARAMS, JSONRPCError
from .entries import RegisteredHandler
from .results import dump, to_content

__all__ = ["Prompt"]


@dataclass
class Prompt(RegisteredHandler):
    """A registered prompt."""

    def definition(self) -> dict[str, Any]:
        """The entry in ``prompts/list``."""
        out = self.base_definition()
        schema = self.signature.input_schema()
        required = set(schema.get("required", []))
        arguments = []
        for name, prop in schema["properties"].items():
            argument: dict[str, Any] = {"name": name, "required": name in required}
            if prop.get("description"):
                argument["description"] = prop["description"]
            arguments.append(argument)
        if arguments:
            out["arguments"] = arguments
        return out

    async def render(self, arguments: dict[str, Any] | None, context: Any) -> dict[str, Any]:
        """Run the handler and return a ``GetPromptResult``."""
        try:
            kwargs = self.signature.bind(arguments, context)
        except ValidationError as exc:
            detail = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise JSONRPCError(INVALID_PARAMS, f"Invalid arguments for prompt {self.name}: {detail}") from exc
        value = await self.run(kwargs)
        if isinstance(value, mt.GetPromptResult):
            return dump(value)
        items = value if isinstance(value, list) else [value]
        result: dict[str, Any] = {"messages": [self._message(item) for item in items]}
        if self.description:
            result["description"] = self.description
        return result

    @staticmethod
    def _message(item: Any) -> dict[str, Any]:
        if isinstance(item, mt.PromptMessage):
            return dump(item)
        if isinstance(item, dict) and "role" in item and "content" in item:
            return item
        if isinstance(item, BaseModel) and not isinstance(item, mt.TextContent | mt.ImageContent):
            item = item.model_dump_json()
        return {"role": "user", "content": to_content(item)[0]}
