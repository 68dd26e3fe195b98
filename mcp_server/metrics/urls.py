"""The URL to include: ``path("", include("mcp_server.metrics.urls"))`` serves ``/metrics``."""

from __future__ import annotations

from django.urls import path

from .views import metrics

__all__ = ["urlpatterns"]

urlpatterns = [path("metrics", metrics, name="mcp_metrics")]
