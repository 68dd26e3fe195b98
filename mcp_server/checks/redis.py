"""Checks that faults are bounded (I11) where MCP waits on Redis: ``mcp_server.W002`` (a channels-redis
layer's hosts), ``W008`` (the Redis cache of ``LEDGER_CACHE_ALIAS``)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Warning

from ..conf import MCPSettings
from .base import mcp_check, seconds, url_options

__all__ = ["LAYER_RECEIVE_BLOCK", "REDIS_CACHES", "check_redis_cache_timeouts", "check_redis_channel_layer"]


LAYER_RECEIVE_BLOCK = 5.0
"""Seconds channels-redis blocks in each receive (``BZPOPMIN``): a host's read timeout must exceed it."""


def _layer_host_bounded(host: Any) -> bool:
    options = url_options(host.get("address") if isinstance(host, dict) else host)
    if isinstance(host, dict):
        options = {**options, **host}
    read = seconds(options.get("socket_timeout"))
    return (
        read is not None
        and read > LAYER_RECEIVE_BLOCK
        and seconds(options.get("socket_connect_timeout")) is not None
    )


@mcp_check
def check_redis_channel_layer(conf: MCPSettings) -> list[CheckMessage]:
    """W002: a channels-redis layer whose hosts wait on Redis for ever, or too briefly for its receive."""
    alias = conf.CHANNEL_LAYER
    layers = getattr(settings, "CHANNEL_LAYERS", {}) or {}
    layer = layers.get(alias) if isinstance(alias, str) and isinstance(layers, dict) else None
    if not isinstance(layer, dict) or "channels_redis" not in str(layer.get("BACKEND", "")):
        return []
    hosts = (layer.get("CONFIG") or {}).get("hosts") or []
    # No hosts: channels-redis connects to localhost with redis-py's defaults, so that warrants W002 too.
    if hosts and all(_layer_host_bounded(host) for host in hosts):
        return []
    return [
        Warning(
            f"CHANNEL_LAYERS[{alias!r}] uses channels-redis without a suitable 'socket_timeout' and "
            "'socket_connect_timeout' on each host.",
            hint=(
                f"Give each host as a dict with 'socket_timeout' above {LAYER_RECEIVE_BLOCK:g} s "
                "(channels-redis blocks that long in each receive; redis-py 8's default of 5 s cuts it short "
                "and ends every quiet consumer), e.g. 15, and 'socket_connect_timeout', e.g. 3: without "
                "them a Redis that stops answering hangs the requests that wait on it."
            ),
            id="mcp_server.W002",
        )
    ]


REDIS_CACHES = ("django.core.cache.backends.redis.RedisCache", "django_redis.cache.RedisCache")


@mcp_check
def check_redis_cache_timeouts(conf: MCPSettings) -> list[CheckMessage]:
    """W008: the Redis cache MCP uses (``LEDGER_CACHE_ALIAS``) has no socket timeouts."""
    alias = conf.LEDGER_CACHE_ALIAS
    caches = getattr(settings, "CACHES", {}) or {}
    cache = caches.get(alias) if isinstance(alias, str) and isinstance(caches, dict) else None
    if not isinstance(cache, dict) or str(cache.get("BACKEND", "")) not in REDIS_CACHES:
        return []
    options = cache.get("OPTIONS") or {}
    if isinstance(options, dict) and all(
        seconds(options.get(key)) is not None for key in ("socket_timeout", "socket_connect_timeout")
    ):
        return []
    return [
        Warning(
            f"CACHES[{alias!r}] is on Redis without 'socket_timeout' and 'socket_connect_timeout' in "
            "its OPTIONS.",
            hint=(
                "A Redis that stops answering would hold the ledger writer and the threads of cache calls "
                "for ever; set both, e.g. 5 and 3 seconds (at most STORE_TIMEOUT)."
            ),
            id="mcp_server.W008",
        )
    ]
