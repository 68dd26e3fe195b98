"""OAuth scopes of the site's MCP servers, and what they mean as token scopes.

``mcp`` (the default) means everything the user may use. ``tool:<name>``, ``resource:<uri or template>``
and ``prompt:<name>``, with shell-style wildcards (``tool:books_*``), narrow a token to what they name, as
the scopes of an ``mcp_`` token do; the user's permissions still apply.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from oauth2_provider.scopes import BaseScopes

from ..auth.oauth import LOCAL_SCOPE

__all__ = ["MCPScopes", "describe", "is_valid_scope", "token_scopes"]

_NARROW = re.compile(r"^(tool|resource|prompt):[\x21\x23-\x5b\x5d-\x7e]{1,200}$")
_KINDS = {"tool": "the tool", "resource": "the resource", "prompt": "the prompt"}


def is_valid_scope(scope: str) -> bool:
    """Whether ``scope`` is ``mcp`` or a ``tool:``, ``resource:`` or ``prompt:`` scope."""
    return scope == LOCAL_SCOPE or bool(_NARROW.match(scope))


def describe(scope: str) -> str:
    """The scope in words, for the consent page."""
    if scope == LOCAL_SCOPE:
        return "Use everything you may use on this MCP server, as you"
    kind, _sep, name = scope.partition(":")
    what = "matching" if any(c in name for c in "*?[") else ""
    return " ".join(p for p in ["Use", _KINDS.get(kind, kind) + "s" * bool(what), what, name] if p)


def token_scopes(scope: str) -> list[str]:
    """The token scopes an OAuth ``scope`` string grants; ``[]`` (no restriction) when it has ``mcp``."""
    scopes = [s for s in scope.split() if is_valid_scope(s)]
    if LOCAL_SCOPE in scopes:
        return []
    return scopes or ["-"]  # no valid scope at all: a pattern nothing matches


class _Descriptions(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return describe(key)


class MCPScopes(BaseScopes):  # type: ignore[misc]
    """DOT's scopes backend: ``mcp`` is listed and the default; narrow scopes are accepted as well."""

    def get_all_scopes(self) -> dict[str, str]:
        return _Descriptions({LOCAL_SCOPE: describe(LOCAL_SCOPE)})

    def get_available_scopes(
        self, application: Any = None, request: Any = None, *args: Any, **kwargs: Any
    ) -> list[str]:
        return [LOCAL_SCOPE]

    def get_default_scopes(
        self, application: Any = None, request: Any = None, *args: Any, **kwargs: Any
    ) -> list[str]:
        return [LOCAL_SCOPE]


def all_valid(scopes: Iterable[str]) -> bool:
    """Whether every scope is one the server knows."""
    return all(is_valid_scope(s) for s in scopes)
