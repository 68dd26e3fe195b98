"""The live page's WebSocket route, served by :func:`mcp_server.routing.mcp_application`.

Sites with their own ``ProtocolTypeRouter`` add :func:`live_urlpatterns` to their WebSocket routes, inside
``AuthMiddlewareStack`` (the consumer needs ``scope["user"]``) and ``AllowedHostsOriginValidator``.
"""

from __future__ import annotations

from django.urls import URLPattern, path

from .consumer import LiveConsumer

__all__ = ["LIVE_PATH", "live_urlpatterns"]

LIVE_PATH = "mcp-admin/live/"
"""Where the live page's socket connects (``LedgerEntryAdmin.live_websocket_path`` must agree)."""


def live_urlpatterns() -> list[URLPattern]:
    """Channels URL patterns of the live page's socket."""
    return [path(LIVE_PATH, LiveConsumer.as_asgi())]
