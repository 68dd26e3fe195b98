"""``ExactPathsFirst``: the MCP endpoints' fixed paths are found in a dict, and what each application is
given is exactly what Channels' ``URLRouter`` gives it; every other path goes through the router."""

from __future__ import annotations

from typing import Any

import pytest
from channels.routing import URLRouter
from django.urls import path, re_path

from mcp_server.routing import ExactPathsFirst


class Seen:
    """An ASGI application that keeps the scope it was called with."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.scopes: list[dict[str, Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> str:
        self.scopes.append(scope)
        return self.name


def routers() -> tuple[ExactPathsFirst, URLRouter, dict[str, Seen]]:
    apps = {name: Seen(name) for name in ("mcp", "item", "defaulted", "django")}
    patterns = [
        path("mcp", apps["mcp"]),
        path("mcp/", apps["mcp"]),
        path("items/<int:pk>", apps["item"]),
        path("fixed", apps["defaulted"], {"flavour": "plain"}),
    ]
    router = URLRouter([*patterns, re_path(r"", apps["django"])])
    return ExactPathsFirst(patterns, router), URLRouter([*patterns, re_path(r"", apps["django"])]), apps


@pytest.mark.parametrize(
    "scope",
    [
        {"type": "http", "path": "/mcp"},
        {"type": "http", "path": "/mcp/"},
        {"type": "http", "path": "//mcp"},
        {"type": "http", "path": "/site/mcp", "root_path": "/site"},
        {"type": "http", "path": "/items/7"},
        {"type": "http", "path": "/fixed"},
        {"type": "http", "path": "/mcpx"},
        {"type": "http", "path": "/elsewhere/mcp"},
    ],
)
async def test_each_path_reaches_the_application_urlrouter_picks_with_the_same_scope(
    scope: dict[str, Any],
) -> None:
    fast, plain, apps = routers()
    chosen = await fast(dict(scope), None, None)
    assert chosen == await plain(dict(scope), None, None)
    first, second = apps[chosen].scopes
    assert first == second


async def test_only_the_fixed_paths_without_defaults_are_looked_up() -> None:
    fast, _plain, _apps = routers()
    assert set(fast.exact) == {"mcp", "mcp/"}


async def test_a_path_outside_the_root_path_is_left_to_the_router() -> None:
    fast, _plain, _apps = routers()
    with pytest.raises(ValueError, match="No route found"):
        await fast({"type": "http", "path": "/mcp", "root_path": "/site"}, None, None)
