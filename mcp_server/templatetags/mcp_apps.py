"""``{% load mcp_apps %}``: template tags for MCP Apps views (``@mcp.tool(app="...")``).

``{% mcp_app_bridge %}`` puts the bridge (``mcp_server/static/mcp_server/apps/bridge.js``, which defines
``McpApp``) inline in the view: hosts render a view from its HTML alone, and the restrictive CSP a host
applies by default lets inline scripts run, so the view needs no network access to reach the host.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from django import template
from django.utils.safestring import SafeString, mark_safe

__all__ = ["BRIDGE_PATH", "bridge_source", "mcp_app_bridge"]

register = template.Library()

BRIDGE_PATH = Path(__file__).resolve().parent.parent / "static" / "mcp_server" / "apps" / "bridge.js"
"""The bridge as shipped (also served by staticfiles as ``mcp_server/apps/bridge.js``)."""


@cache
def bridge_source() -> str:
    """The bridge's JavaScript (read once per process)."""
    source = BRIDGE_PATH.read_text(encoding="utf-8")
    if "</script" in source.lower():  # pragma: no cover - a bug of this package
        raise RuntimeError("bridge.js must not contain </script")
    return source


@register.simple_tag
def mcp_app_bridge() -> SafeString:
    """``<script>`` holding the bridge (``window.McpApp``)."""
    return mark_safe(f"<script>\n{bridge_source()}</script>")
