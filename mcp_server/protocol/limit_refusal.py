"""What a request refused by a rate limit or a quota is answered with (``RATE_LIMIT_REFUSAL``).

- ``"error"`` (the default): the JSON-RPC error :class:`~mcp_server.wire.errors.RateLimited`, with ``data``
  naming the limit and ``retryAfter`` in seconds, for every method.
- ``"tool_result"``: a refused ``tools/call`` is answered as a tool result with ``isError: true``, whose text
  tells the model how long to wait; the same ``data`` is in its ``_meta`` under :data:`RATE_LIMIT_KEY`, and
  in ``structuredContent`` when the tool declares no ``outputSchema`` (and the revision has the field).
  Any other method is still answered with the error.

Either way the request settles ``rate_limited`` (its own ledger outcome) and no handler runs.
"""

from __future__ import annotations

from typing import Any

from ..conf import mcp_settings
from ..core.context import Context
from ..registry.server import server_of
from ..wire.errors import RateLimited
from ..wire.jsonrpc import error_response, result_response
from ..wire.shapes import shaped_result
from .v2026_07_28 import finish_result

__all__ = ["RATE_LIMIT_KEY", "REFUSAL_SHAPES", "refusal_response", "refusal_result"]

RATE_LIMIT_KEY = "django-mcp-ledger/rateLimit"
"""The ``_meta`` key of a refusal answered as a tool result: the error's ``data`` (limit, retryAfter)."""

REFUSAL_SHAPES = ("error", "tool_result")
"""The values ``RATE_LIMIT_REFUSAL`` may take."""


def refusal_result(ctx: Context, refusal: RateLimited) -> dict[str, Any]:
    """The ``isError`` tool result standing for ``refusal``, in the shape of the request's revision."""
    data: dict[str, Any] = dict(refusal.data)
    wait = refusal.retry_after
    name = str(ctx.params.get("name"))
    text = (
        f"{refusal.message}. The tool {name!r} was not run: wait {wait} seconds before calling it again"
        " (retrying sooner is refused too, and counts)."
    )
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": True}
    tool = server_of(ctx).tools.get(name) if ctx.server is not None else None
    if getattr(tool, "output_schema", None) is None:
        result["structuredContent"] = data
    result["_meta"] = {RATE_LIMIT_KEY: data}
    if ctx.sessionless:
        return finish_result(ctx, result)
    return shaped_result("tools/call", ctx.session.protocol_version, result)


def refusal_response(ctx: Context, refusal: RateLimited) -> dict[str, Any]:
    """The response to a request refused for a rate limit, as ``RATE_LIMIT_REFUSAL`` shapes it."""
    if ctx.method == "tools/call" and mcp_settings.RATE_LIMIT_REFUSAL == "tool_result":
        return result_response(ctx.request_id, refusal_result(ctx, refusal))
    return error_response(ctx.request_id, refusal)
