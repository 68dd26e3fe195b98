"""Checks of MCP Apps views (``@mcp.tool(app=...)``): ``mcp_server.E080`` (``APP_ORIGIN`` is not an
origin), ``E081`` (``APP_CSP`` is not a ``_meta.ui.csp``), ``W080`` (a view's template does not load)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.template import TemplateDoesNotExist
from django.template.loader import get_template

from ..conf import MCPSettings
from ..registry.apps import CSP_KEYS, AppResource, check_csp
from ..registry.server import MCPServer, mcp
from .base import mcp_check

__all__ = ["check_app_settings", "check_app_templates", "missing_templates"]


def _origin_problem(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        return "must be None or a string"
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.path not in ("", "/"):
        return "must be an origin such as 'https://library.example' (a scheme and a host, no path)"
    if parts.query or parts.fragment:
        return "must be an origin, without a query or fragment"
    return None


@mcp_check
def check_app_settings(conf: MCPSettings) -> list[CheckMessage]:
    """E080: ``APP_ORIGIN`` is not ``None`` or an http(s) origin. E081: ``APP_CSP`` is not ``None`` or a
    dict of :data:`~mcp_server.registry.apps.CSP_KEYS` to lists of origins."""
    messages: list[CheckMessage] = []
    problem = _origin_problem(conf.APP_ORIGIN)
    if problem is not None:
        messages.append(
            Error(
                f"MCP_SERVER['APP_ORIGIN'] {problem}.",
                hint="The site's origin in MCP Apps views (None: the origin of each resources/read request).",
                id="mcp_server.E080",
            )
        )
    try:
        check_csp(conf.APP_CSP, "MCP_SERVER['APP_CSP']")
    except TypeError as exc:
        messages.append(
            Error(
                f"{exc}.",
                hint=f"e.g. {{'resourceDomains': ['https://cdn.example']}} (keys among {list(CSP_KEYS)}).",
                id="mcp_server.E081",
            )
        )
    return messages


def missing_templates(server: MCPServer) -> list[tuple[str, str]]:
    """``(uri, template)`` of each view of ``server`` whose template does not load."""
    missing = []
    for resource in server.resources.values():
        if isinstance(resource, AppResource):
            try:
                get_template(resource.app.template)
            except TemplateDoesNotExist:
                missing.append((resource.uri, resource.app.template))
    return missing


@register(Tags.templates)
def check_app_templates(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """W080: a view of the default server names a template Django cannot find (its reads would fail)."""
    return [
        Warning(
            f"The MCP Apps view {uri} renders the template {template!r}, which cannot be found.",
            hint="Put it in an app's templates/ directory or in TEMPLATES' DIRS.",
            id="mcp_server.W080",
        )
        for uri, template in missing_templates(mcp)
    ]
