"""Who may use a tool, resource or prompt: its permission for the user, and the token's scopes.

Permission checks may query the database (``user.has_perm``) and permission callables are plain
functions, so the checks for one request run together in one worker thread, never on the event loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any, TypeVar

from .entries import RegisteredHandler, allowed
from .signature import call_handler

if TYPE_CHECKING:
    from ..core.context import Context

__all__ = ["ausable", "scope_key", "scopes_allow", "token_scopes", "usable", "usable_entries"]

H = TypeVar("H", bound=RegisteredHandler)


def scope_key(entry: RegisteredHandler) -> str:
    """What a token scope must match to reach ``entry``.

    ``tool:<name>``, ``resource:<uri or template>`` or ``prompt:<name>``.
    """
    from .prompts import Prompt
    from .resources import Resource
    from .tools import Tool

    if isinstance(entry, Tool):
        return f"tool:{entry.name}"
    if isinstance(entry, Resource):
        return f"resource:{entry.uri}"
    if isinstance(entry, Prompt):
        return f"prompt:{entry.name}"
    return f"handler:{entry.name}"


def token_scopes(auth: Any) -> list[str] | None:
    """The scopes of the credential that authenticated the request; ``None`` (or empty) restricts nothing."""
    scopes = getattr(auth, "scopes", None)
    if isinstance(scopes, str):
        scopes = scopes.split()
    if not scopes:
        return None
    return [str(s) for s in scopes]


def scopes_allow(scopes: Sequence[str] | None, key: str) -> bool:
    """Whether one of ``scopes`` matches ``key`` (shell-style wildcards); no scopes allow everything."""
    return scopes is None or any(fnmatchcase(key, scope) for scope in scopes)


def usable(entry: RegisteredHandler, user: Any, auth: Any = None) -> bool:
    """Whether ``user``, authenticated by ``auth``, may see and use ``entry`` (synchronous)."""
    return scopes_allow(token_scopes(auth), scope_key(entry)) and allowed(entry.permission, user)


def _filter(entries: Sequence[H], user: Any, auth: Any) -> list[H]:
    return [e for e in entries if usable(e, user, auth)]


def _auth_of(ctx: Context) -> Any:
    return getattr(ctx.request, "auth", None)


async def usable_entries(entries: Sequence[H], ctx: Context) -> list[H]:
    """The entries ``ctx``'s user may use, checked in one worker thread when any has a permission."""
    auth = _auth_of(ctx)
    if all(e.permission is None for e in entries):
        scopes = token_scopes(auth)
        return [e for e in entries if scopes_allow(scopes, scope_key(e))]
    result: list[H] = await call_handler(_filter, entries, ctx.user, auth)
    return result


async def ausable(entry: RegisteredHandler, ctx: Context) -> bool:
    """Async :func:`usable` for the request ``ctx`` serves."""
    return bool(await usable_entries([entry], ctx))
