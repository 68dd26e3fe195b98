"""Deprecated: ``mcp_server.forms_as_tools`` moved to ``mcp_server.expose.forms``.

This module only re-exports it, and warns when imported; ``from mcp_server import expose_form`` is
unchanged.
"""

from __future__ import annotations

from mcp_server.core.moved import warn_moved
from mcp_server.expose.forms import expose_form, form_errors_message

__all__ = ["expose_form", "form_errors_message"]

warn_moved("mcp_server.forms_as_tools", "mcp_server.expose.forms")
