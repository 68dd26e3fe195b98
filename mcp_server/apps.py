"""App configuration: discovers each installed app's ``mcp.py`` the way the admin discovers ``admin.py``."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.module_loading import autodiscover_modules


class MCPServerConfig(AppConfig):
    """``mcp_server``."""

    name = "mcp_server"
    verbose_name = "MCP server"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)

        if self.apps is not None and self.apps.is_installed("django.contrib.admin"):
            from .auth import admin as token_admin  # noqa: F401  (registers the access-token admin)

        autodiscover_modules("mcp")

        from .protocol.dispatcher import handler_table
        from .registry.server import mcp

        handler_table(mcp)  # the default server's table of methods, checked now: a clash fails at start-up

        from .auth.revocation import connect_signals

        connect_signals()  # a revoked token or deactivated user ends its open streams at once

        from .runtime import Runtime

        self.runtime = Runtime(freeze_gc=True)
        """This process's MCP runtime (see :func:`mcp_server.runtime.get_runtime`)."""
