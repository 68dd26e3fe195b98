"""The app config of the site's own authorization server: safe DOT settings, system checks, the token
cache's invalidation and the upkeep's pruning of unused registrations."""

from __future__ import annotations

from django.apps import AppConfig

__all__ = ["OAuthConfig"]


class OAuthConfig(AppConfig):
    """``mcp_server.oauth``: list it (after ``oauth2_provider``) in ``INSTALLED_APPS``."""

    name = "mcp_server.oauth"
    label = "mcp_server_oauth"
    verbose_name = "MCP sign-in (OAuth)"

    def ready(self) -> None:
        from django.core.checks import Tags, register

        from ..runtime.upkeep import add_default_hook
        from .checks import check_oauth_server
        from .defaults import apply_safe_defaults, install_admin_classes
        from .token_cache import connect_signals

        register(check_oauth_server, Tags.security)
        apply_safe_defaults()
        install_admin_classes()
        connect_signals()
        add_default_hook("mcp_server.oauth.prune.upkeep_prune")
