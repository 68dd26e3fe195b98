"""Checks of what operators read: ``mcp_server.E051`` (``METRICS_ACCESS``, who may read ``/metrics``) and
``E052`` (``TRACE_URL``, the admin's link to a request's trace)."""

from __future__ import annotations

from django.core.checks import CheckMessage, Error

from ..conf import MCPSettings
from ..metrics.access import access_problem
from ..telemetry.links import template_problem
from .base import mcp_check

__all__ = ["check_metrics_access", "check_trace_url"]


@mcp_check
def check_metrics_access(conf: MCPSettings) -> list[CheckMessage]:
    """E051: ``METRICS_ACCESS`` is none of ``"staff"``, ``{"token": ...}``, ``{"ips": [...]}``."""
    problem = access_problem(conf.METRICS_ACCESS)
    if problem is None:
        return []
    return [
        Error(
            f"MCP_SERVER['METRICS_ACCESS'] {problem}.",
            hint="Who may read /metrics (mcp_server.metrics); while it is wrong, everyone is refused (403).",
            id="mcp_server.E051",
        )
    ]


@mcp_check
def check_trace_url(conf: MCPSettings) -> list[CheckMessage]:
    """E052: ``TRACE_URL`` is neither ``None`` nor an http(s) URL template with ``{trace_id}``."""
    problem = template_problem(conf.TRACE_URL)
    if problem is None:
        return []
    return [
        Error(
            f"MCP_SERVER['TRACE_URL'] {problem}.",
            hint='e.g. "https://jaeger.example/trace/{trace_id}"; while it is wrong, no link is made.',
            id="mcp_server.E052",
        )
    ]
