"""A per-address limit on the token and registration endpoints (``MCP_SERVER["OAUTH_THROTTLE"]``)."""

from __future__ import annotations

import time

from django.core.cache import cache
from django.http import HttpRequest, JsonResponse

from ..conf import mcp_settings

__all__ = ["WINDOW", "throttled"]

WINDOW = 60
"""Seconds of one counting window."""


def throttled(request: HttpRequest, bucket: str) -> JsonResponse | None:
    """A 429 answer when the client's address is over the limit of ``bucket`` in this minute, else ``None``.

    Counted in the default cache (shared by the workers when it is Redis); the address is ``REMOTE_ADDR``
    (behind a proxy, let the server take the client's from its headers: ``uvicorn --forwarded-allow-ips``,
    ``daphne --proxy-headers``).
    """
    limits = mcp_settings.OAUTH_THROTTLE or {}
    limit = limits.get(bucket)
    if not limit:
        return None
    now = time.time()
    window = int(now // WINDOW)
    key = f"mcp-oauth-throttle:{bucket}:{request.META.get('REMOTE_ADDR', '')}:{window}"
    cache.add(key, 0, WINDOW * 2)
    try:
        count = cache.incr(key)
    except ValueError:  # expired between add and incr
        count = 1
    if count <= limit:
        return None
    retry = max(1, int(WINDOW - now % WINDOW))
    response = JsonResponse(
        {"error": "slow_down", "error_description": f"Too many requests; retry in {retry} s"}, status=429
    )
    response["Retry-After"] = str(retry)
    return response
