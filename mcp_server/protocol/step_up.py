"""Step-up: a call the user may make but the token's scopes do not reach is refused, naming the scopes.

:func:`scope_refusal` judges a request before it runs (``serving.start_request``), so that the HTTP
transport can still answer it with 403 and an ``insufficient_scope`` challenge whatever ``RESPONSE_MODE``
says: the refusal is settled through the request table like any answer (the ledger records it once, its
reply is the JSON-RPC error :class:`~mcp_server.wire.errors.InsufficientScope`). What the user's own
permissions forbid is not judged here: the handler answers it as unknown, as before.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..core.stores import bounded
from ..registry.access import apermitted, granted_scopes, missing_scopes, token_scopes
from ..registry.server import server_of
from ..wire.errors import InsufficientScope

if TYPE_CHECKING:
    from ..core.context import Context
    from ..registry.entries import RegisteredHandler

__all__ = ["SCOPED_METHODS", "scope_refusal", "target_of"]

logger = logging.getLogger("mcp_server.requests")

SCOPED_METHODS = frozenset(
    {"tools/call", "prompts/get", "resources/read", "resources/subscribe", "resources/unsubscribe"}
)
"""The requests that use one tool, prompt or resource, and so can be refused for the token's scopes."""


def target_of(ctx: Context) -> tuple[RegisteredHandler, str] | None:
    """The tool, prompt or resource the request names, and how to name it in words; ``None`` if none."""
    server, params = server_of(ctx), ctx.params
    if ctx.method in ("tools/call", "prompts/get"):
        name = params.get("name")
        if not isinstance(name, str):
            return None
        registry = server.tools if ctx.method == "tools/call" else server.prompts
        entry = registry.get(name)
        kind = "tool" if ctx.method == "tools/call" else "prompt"
        return (entry, f"the {kind} {name!r}") if entry is not None else None
    uri = params.get("uri")
    if not isinstance(uri, str):
        return None
    found = server.find_resource(uri)
    return (found[0], f"the resource {uri!r}") if found is not None else None


async def scope_refusal(ctx: Context) -> InsufficientScope | None:
    """The refusal of ``ctx``'s request for the token's scopes, or ``None`` when it may run.

    Costs next to nothing for a credential without scopes or a call they reach (no await); a permission
    check (bounded by ``STORE_TIMEOUT``) only when they do not reach the target. A check that fails leaves
    the request to its handler, which answers under the reply guarantee.
    """
    auth = getattr(ctx.request, "auth", None)
    if ctx.method not in SCOPED_METHODS or token_scopes(auth) is None:
        return None
    target = target_of(ctx)
    if target is None:
        return None
    entry, what = target
    missing = missing_scopes(entry, auth)
    if missing is None:
        return None
    try:
        if not await bounded(apermitted(entry, ctx), "database"):
            return None  # the user may not use it: invisible, answered as unknown by its handler
    except Exception:
        logger.warning("the scope check of %r (%s) failed", ctx.request_id, ctx.method, exc_info=True)
        return None
    return InsufficientScope(missing, granted_scopes(auth), what)
