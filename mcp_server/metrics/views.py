"""The ``/metrics`` view: guarded by ``METRICS_ACCESS`` (:mod:`.access`), then 404 while Prometheus is off
(``prometheus_client`` not installed, or ``TELEMETRY`` off: then nothing imports it), else the scrape."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed

from ..runtime import get_runtime
from ..telemetry import prometheus_enabled
from .access import refusal
from .figures import aledger_figures

__all__ = ["metrics"]

OFF = "Not found: Prometheus metrics are off (install prometheus_client; MCP_SERVER['TELEMETRY'] is on).\n"


async def metrics(request: HttpRequest) -> HttpResponse:
    """The request metrics of every worker and the ledger's figures, in Prometheus's text format (or
    OpenMetrics, when the scrape asks for it)."""
    if request.method not in ("GET", "HEAD"):
        return HttpResponseNotAllowed(["GET", "HEAD"])
    refused = await refusal(request)
    if refused is not None:
        return refused
    if not prometheus_enabled():
        return HttpResponse(OFF, status=404, content_type="text/plain; charset=utf-8")
    from .exposition import render  # prometheus_client, only now

    figures = await aledger_figures()
    body, content_type = render(figures, request.META.get("HTTP_ACCEPT", ""), get_runtime().writer)
    response = HttpResponse(body, content_type=content_type)
    response["Cache-Control"] = "no-store"
    return response
