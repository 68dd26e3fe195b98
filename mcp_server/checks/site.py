"""``mcp_server.W003``: ``ASGI_APPLICATION`` is unset, cannot be imported, or routes no MCP endpoint."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Tags, Warning, register
from django.utils.module_loading import import_string

__all__ = ["check_asgi_routing", "routed_servers"]


_FOLLOW = ("application_mapping", "routes", "callback", "inner", "app", "application")


def _children(node: Any) -> Iterator[Any]:
    for attribute in _FOLLOW:
        child = getattr(node, attribute, None)
        if child is None or child is node:
            continue
        if isinstance(child, dict):
            yield from child.values()
        elif isinstance(child, list | tuple):
            yield from child
        else:
            yield child


def routed_servers(application: Any) -> list[Any]:
    """The ``MCPServer`` objects an ASGI application routes to (through routers and middleware)."""
    from ..transports.consumer import MCPConsumer

    found: list[Any] = []
    seen: set[int] = set()
    stack = [application]
    while stack and len(seen) < 10_000:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        consumer = getattr(node, "consumer_class", None)
        if isinstance(consumer, type) and issubclass(consumer, MCPConsumer):
            server = (getattr(node, "consumer_initkwargs", None) or {}).get("server")
            if server is not None and server not in found:
                found.append(server)
            continue
        stack.extend(_children(node))
    return found


@register(Tags.compatibility)
def check_asgi_routing(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Warn when the site's ASGI application does not route any MCP endpoint."""
    hint = (
        "In asgi.py: application = mcp_application(get_asgi_application()), or add *mcp_urlpatterns() to the "
        "HTTP routes of your ProtocolTypeRouter; set ASGI_APPLICATION to it."
    )
    path = getattr(settings, "ASGI_APPLICATION", None)
    if not path:
        return [
            Warning("ASGI_APPLICATION is not set; MCP is served over ASGI.", hint=hint, id="mcp_server.W003")
        ]
    try:
        application = import_string(path)
    except Exception as exc:
        return [
            Warning(f"ASGI_APPLICATION {path!r} cannot be imported: {exc}", hint=hint, id="mcp_server.W003")
        ]
    if not routed_servers(application):
        return [
            Warning(f"ASGI_APPLICATION {path!r} routes no MCP endpoint.", hint=hint, id="mcp_server.W003")
        ]
    return []
