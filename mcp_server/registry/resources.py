"""Resources at fixed URIs and URI templates (RFC 6570 level 1 and ``{+var}``)."""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from typing import Any

import mcp_types as mt
from pydantic import ValidationError

from ..wire.errors import INVALID_PARAMS, JSONRPCError
from .entries import RegisteredHandler
from .results import dump, to_json_text

__all__ = ["Resource", "compile_template"]

_VARIABLE = re.compile(r"\{(\+?)([A-Za-z_][A-Za-z0-9_]*)\}")


def compile_template(template: str) -> tuple[re.Pattern[str], tuple[str, ...]]:
    """A regex matching URIs produced by ``template`` and the names of its variables."""
    pattern, names, last = "", [], 0
    for match in _VARIABLE.finditer(template):
        pattern += re.escape(template[last : match.start()])
        reserved, name = match.groups()
        pattern += f"(?P<{name}>.+)" if reserved else f"(?P<{name}>[^/?#]+)"
        names.append(name)
        last = match.end()
    pattern += re.escape(template[last:])
    return re.compile(f"^{pattern}$"), tuple(names)


@dataclass
class Resource(RegisteredHandler):
    """A resource (fixed ``uri``) or resource template (``uri`` with ``{variables}``)."""

    uri: str = ""
    mime_type: str | None = None
    size: int | None = None
    annotations: dict[str, Any] | None = None
    ttl_ms: int | None = None
    """``ttlMs`` of this resource's ``resources/read`` results at 2026-07-28 (``None``: ``CACHE_HINTS``)."""
    cache_scope: str | None = None
    """``cacheScope`` (``"public"`` or ``"private"``) of those results (``None``: ``CACHE_HINTS``)."""
    pattern: re.Pattern[str] = field(init=False)
    variables: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.pattern, self.variables = compile_template(self.uri)
        missing = set(self.variables) - set(self.signature.parameter_names)
        if missing:
            raise TypeError(f"resource {self.uri!r}: the handler has no parameter for {sorted(missing)}")
        if self.ttl_ms is not None and (
            isinstance(self.ttl_ms, bool) or not isinstance(self.ttl_ms, int) or self.ttl_ms < 0
        ):
            raise TypeError(f"resource {self.uri!r}: ttl_ms must be an integer >= 0, not {self.ttl_ms!r}")
        if self.cache_scope not in (None, "public", "private"):
            raise TypeError(f"resource {self.uri!r}: cache_scope must be 'public' or 'private'")

    @property
    def is_template(self) -> bool:
        """Whether the URI has variables."""
        return bool(self.variables)

    def definition(self) -> dict[str, Any]:
        """The entry in ``resources/list`` or ``resources/templates/list``."""
        out = self.base_definition()
        out["uriTemplate" if self.is_template else "uri"] = self.uri
        if self.mime_type:
            out["mimeType"] = self.mime_type
        if self.size is not None and not self.is_template:
            out["size"] = self.size
        if self.annotations:
            out["annotations"] = self.annotations
        return out

    def match(self, uri: str) -> dict[str, str] | None:
        """The template variables when ``uri`` is served by this resource, else ``None``."""
        found = self.pattern.match(uri)
        return found.groupdict() if found else None

    async def read(self, uri: str, variables: dict[str, str], context: Any) -> dict[str, Any]:
        """Run the handler and return a ``ReadResourceResult``."""
        try:
            kwargs = self.signature.bind(variables, context)
        except ValidationError as exc:
            raise JSONRPCError(
                INVALID_PARAMS, f"Invalid resource URI {uri}: {exc.errors()[0]['msg']}"
            ) from exc
        value = await self.run(kwargs)
        return {"contents": self.to_contents(uri, value)}

    def to_contents(self, uri: str, value: Any) -> list[dict[str, Any]]:
        """Resource contents for a returned value: text, bytes (blob) or JSON."""
        if isinstance(value, mt.ReadResourceResult):
            return [dump(c) for c in value.contents]
        if isinstance(value, mt.TextResourceContents | mt.BlobResourceContents):
            return [dump(value)]
        if (
            isinstance(value, list)
            and value
            and all(isinstance(v, mt.TextResourceContents | mt.BlobResourceContents) for v in value)
        ):
            return [dump(v) for v in value]
        item: dict[str, Any] = {"uri": uri}
        if isinstance(value, bytes):
            item["mimeType"] = self.mime_type or "application/octet-stream"
            item["blob"] = base64.b64encode(value).decode()
        elif isinstance(value, str):
            item["mimeType"] = self.mime_type or "text/plain"
            item["text"] = value
        else:
            item["mimeType"] = self.mime_type or "application/json"
            item["text"] = to_json_text(value)
        return [item]
