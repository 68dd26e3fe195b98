"""Who may use a tool, resource or prompt: its permission for the user, and the token's scopes.

Permission checks may query the database (``user.has_perm``) and permission callables are plain
functions, so the checks for one request run together in one worker thread, never on the event loop.

What the user's permission forbids is invisible. What the user may use but the token's scopes do not reach
is refused with the scopes to ask for (:func:`missing_scopes`); a credential that can step up (an OAuth
access token: ``auth.step_up``) also sees it listed, marked with :data:`REQUIRED_SCOPE_KEY`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any, TypeVar

from ..auth.oauth import LOCAL_SCOPE
from .entries import RegisteredHandler, allowed
from .signature import call_handler

if TYPE_CHECKING:
    from ..core.context import Context

__all__ = [
    "REQUIRED_SCOPE_KEY",
    "apermitted",
    "ausable",
    "can_step_up",
    "granted_scopes",
    "listed_entries",
    "missing_scopes",
    "required_scope",
    "scope_key",
    "scopes_allow",
    "token_scopes",
    "usable",
    "usable_entries",
]

H = TypeVar("H", bound=RegisteredHandler)

REQUIRED_SCOPE_KEY = "django-mcp-ledger/requiredScope"
"""``_meta`` key of a listed tool, resource or prompt the token's scopes do not reach: the scope (RFC 6750
form, space-separated) to add by re-authorizing before it can be used."""

_SCOPE_TOKEN = re.compile(r"^[\x21\x23-\x5b\x5d-\x7e]+$")
"""RFC 6749 ``scope-token`` (what a ``WWW-Authenticate`` ``scope`` may carry)."""


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


def can_step_up(auth: Any) -> bool:
    """Whether the credential can be widened by re-authorizing (``auth.step_up``: OAuth access tokens)."""
    return bool(getattr(auth, "step_up", False))


def required_scope(entry: RegisteredHandler) -> str:
    """The narrowest scope that reaches ``entry``: its :func:`scope_key`, or ``mcp`` (everything) when that
    key cannot be a scope token (a character RFC 6750 forbids, or a pattern that would not match itself)."""
    key = scope_key(entry)
    return key if _SCOPE_TOKEN.match(key) and fnmatchcase(key, key) else LOCAL_SCOPE


def missing_scopes(entry: RegisteredHandler, auth: Any) -> list[str] | None:
    """The scopes ``entry`` needs that ``auth``'s scopes lack; ``None`` when they reach it."""
    if scopes_allow(token_scopes(auth), scope_key(entry)):
        return None
    return [required_scope(entry)]


def granted_scopes(auth: Any) -> list[str]:
    """The credential's scopes that a ``scope`` challenge can repeat (``[]`` when it is unrestricted)."""
    return [s for s in token_scopes(auth) or [] if _SCOPE_TOKEN.match(s) and s != "-"]


def usable(entry: RegisteredHandler, user: Any, auth: Any = None) -> bool:
    """Whether ``user``, authenticated by ``auth``, may see and use ``entry`` (synchronous)."""
    return scopes_allow(token_scopes(auth), scope_key(entry)) and allowed(entry.permission, user)


def _filter(entries: Sequence[H], user: Any, auth: Any) -> list[H]:
    return [e for e in entries if usable(e, user, auth)]


def _permitted(entries: Sequence[H], user: Any) -> list[H]:
    return [e for e in entries if allowed(e.permission, user)]


def _auth_of(ctx: Context) -> Any:
    return getattr(ctx.request, "auth", None)


async def usable_entries(entries: Sequence[H], ctx: Context) -> list[H]:
    """The entries ``ctx``'s user may use, checked in one worker thread when any has a permission."""
    auth = _auth_of(ctx)
    if all(e.permission is None for e in entries):
        scopes = token_scopes(auth)
        if scopes is None:  # nothing restricts: no key to build
            return list(entries)
        return [e for e in entries if scopes_allow(scopes, scope_key(e))]
    result: list[H] = await call_handler(_filter, entries, ctx.user, auth)
    return result


async def ausable(entry: RegisteredHandler, ctx: Context) -> bool:
    """Async :func:`usable` for the request ``ctx`` serves."""
    return bool(await usable_entries([entry], ctx))


async def apermitted(entry: RegisteredHandler, ctx: Context) -> bool:
    """Whether ``ctx``'s user may use ``entry`` by its permission alone (the token's scopes aside)."""
    return entry.permission is None or bool(await call_handler(_permitted, [entry], ctx.user))


async def listed_entries(entries: Sequence[H], ctx: Context) -> list[tuple[H, list[str] | None]]:
    """What a list shows to ``ctx``'s caller, each entry with the scopes it still needs (``None``: none).

    The entries the caller may use; when the credential can step up (:func:`can_step_up`) and has scopes,
    also those its user may use that the scopes do not reach (a model may then ask for them, and the call's
    ``insufficient_scope`` answer lets the client re-authorize). What the user may not use is never listed.
    """
    auth = _auth_of(ctx)
    if not can_step_up(auth) or token_scopes(auth) is None:
        return [(e, None) for e in await usable_entries(entries, ctx)]
    permitted: list[H] = list(entries)
    if any(e.permission is not None for e in entries):
        permitted = await call_handler(_permitted, entries, ctx.user)
    return [(e, missing_scopes(e, auth)) for e in permitted]
