"""MCP Apps (SEP-1865, extension ``io.modelcontextprotocol/ui``): the extension's wire facts.

A tool names a ``ui://`` resource in ``_meta.ui.resourceUri``; the resource is an HTML document served as
:data:`APP_MIME_TYPE`, rendered by the host in a sandboxed iframe. A client declares the extension under
``capabilities.extensions`` with the MIME types it renders (``{"mimeTypes": [APP_MIME_TYPE]}``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["APPS_EXTENSION", "APP_MIME_TYPE", "UI_SCHEME", "VISIBILITIES", "client_supports_apps"]

APPS_EXTENSION = "io.modelcontextprotocol/ui"
"""The extension's identifier, under ``capabilities.extensions`` of both sides (SEP-2133)."""

APP_MIME_TYPE = "text/html;profile=mcp-app"
"""The MIME type of a view (the only one the stable revision, 2026-01-26, defines)."""

UI_SCHEME = "ui://"
"""The URI scheme of a view's resource."""

VISIBILITIES = ("model", "app")
"""The values of a tool's ``_meta.ui.visibility``: listed to the model, callable by the view."""


def client_supports_apps(capabilities: Mapping[str, Any]) -> bool:
    """Whether client ``capabilities`` declare the extension with :data:`APP_MIME_TYPE` among its
    ``mimeTypes`` (the extension's one required setting)."""
    extensions = capabilities.get("extensions")
    settings = extensions.get(APPS_EXTENSION) if isinstance(extensions, Mapping) else None
    mime_types = settings.get("mimeTypes") if isinstance(settings, Mapping) else None
    return isinstance(mime_types, list) and APP_MIME_TYPE in mime_types
