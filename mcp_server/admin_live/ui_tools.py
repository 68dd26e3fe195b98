"""MCP Apps in the admin: which ledger rows are calls of tools with a view, and which were made by a view.

A host does not say who made a ``tools/call``; a tool with ``visibility=["app"]`` is listed to no model, so
its calls are the views'. Tools are looked up on the default server (``mcp_server.mcp``, and what it
``include``s) by the name the row keeps.
"""

from __future__ import annotations

from ..registry.server import mcp

__all__ = ["UI_LABELS", "ui_kind"]

UI_LABELS = {"app": "by a view", "view": "has a view"}
"""What the admin shows beside a tool's name for each :func:`ui_kind`."""


def ui_kind(method: str, name: str) -> str:
    """``"app"``: a call of a tool only views may call (made by a view); ``"view"``: of a tool whose result
    a view shows; ``""``: anything else (another method, an unknown tool)."""
    if method != "tools/call":
        return ""
    tool = mcp.tools.get(name)
    if tool is None:
        return ""
    if tool.app_only:
        return "app"
    return "view" if tool.ui_resource else ""
