"""From a ledger row to its trace: the link ``MCP_SERVER["TRACE_URL"]`` makes of a request's trace id.

The template is a URL with ``{trace_id}`` in it, and maybe ``{span_id}``: only those two are replaced, each
by its value percent-encoded (nothing else of the template is interpreted, so a Grafana URL with JSON braces
in its query is fine). A template that is not an ``http`` or ``https`` URL is refused (``mcp_server.E052``)
and makes no link. What a page does with the link is its own escaping (``format_html``, a DOM property).
"""

from __future__ import annotations

from functools import lru_cache
from urllib.parse import quote, urlsplit

from ..conf import mcp_settings

__all__ = ["SPAN_ID", "TRACE_ID", "template_problem", "trace_url"]

TRACE_ID = "{trace_id}"
SPAN_ID = "{span_id}"


def _fill(template: str, trace_id: str, span_id: str) -> str:
    return template.replace(TRACE_ID, quote(trace_id, safe="")).replace(SPAN_ID, quote(span_id, safe=""))


def template_problem(template: object) -> str | None:
    """Why ``template`` cannot be ``TRACE_URL`` (``None``: it can; ``None`` itself can)."""
    if template is None:
        return None
    if not isinstance(template, str):
        return "must be a URL (a string) or None"
    return _url_problem(template)


@lru_cache(maxsize=16)
def _url_problem(template: str) -> str | None:
    if TRACE_ID not in template:
        return f"must contain {TRACE_ID}"
    try:
        parts = urlsplit(_fill(template, "0" * 32, "0" * 16))
    except ValueError as exc:
        return f"is not a URL ({exc})"
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return "must be an absolute http:// or https:// URL"
    return None


def trace_url(trace_id: str, span_id: str = "") -> str | None:
    """The link to the trace ``trace_id`` (``span_id``: its span), or ``None``: no id, or no (usable)
    ``TRACE_URL``."""
    template = mcp_settings.TRACE_URL
    if not trace_id or template is None or template_problem(template) is not None:
        return None
    return _fill(template, trace_id, span_id)
