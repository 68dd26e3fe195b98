"""System checks for ``MCP_SERVER`` (ids ``mcp_server.E0xx`` / ``W0xx``, listed in the README)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.utils.module_loading import import_string

from .conf import RESPONSE_MODES, MCPSettings

__all__ = ["check_settings"]


@register(Tags.compatibility)
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Validate ``MCP_SERVER``."""
    messages: list[CheckMessage] = []
    raw = getattr(settings, "MCP_SERVER", {})
    if not isinstance(raw, dict):
        return [Error("MCP_SERVER must be a dict.", id="mcp_server.E000")]
    conf = MCPSettings.from_django()
    for key in conf.unknown_keys:
        messages.append(
            Error(
                f"MCP_SERVER has an unknown key {key!r}.",
                hint="See the settings table in the README.",
                id="mcp_server.E001",
            )
        )
    if conf.RESPONSE_MODE not in RESPONSE_MODES:
        messages.append(
            Error(f"MCP_SERVER['RESPONSE_MODE'] must be one of {RESPONSE_MODES}.", id="mcp_server.E002")
        )
    channel_layers = getattr(settings, "CHANNEL_LAYERS", {}) or {}
    if not isinstance(conf.CHANNEL_LAYER, str) or conf.CHANNEL_LAYER not in channel_layers:
        messages.append(
            Error(
                f"CHANNEL_LAYERS has no alias {conf.CHANNEL_LAYER!r}.",
                hint="Use InMemoryChannelLayer for one process, channels_redis for several.",
                id="mcp_server.E003",
            )
        )
    middleware = conf.MIDDLEWARE
    if not isinstance(middleware, list | tuple):
        messages.append(
            Error("MCP_SERVER['MIDDLEWARE'] must be a list of import paths.", id="mcp_server.E004")
        )
        middleware = []
    for path in middleware:
        try:
            if not isinstance(path, str):
                raise ImportError("not an import path")
            import_string(path)
        except ImportError as exc:
            messages.append(
                Error(
                    f"MCP_SERVER['MIDDLEWARE'] entry {path!r} cannot be imported: {exc}", id="mcp_server.E004"
                )
            )
    for key in ("REQUEST_TIMEOUT", "SESSION_IDLE_TIMEOUT"):
        value = getattr(conf, key)
        if value is not None and (
            not isinstance(value, int | float) or isinstance(value, bool) or value <= 0
        ):
            messages.append(
                Error(f"MCP_SERVER[{key!r}] must be a positive number or None.", id="mcp_server.E005")
            )
    for key in ("LEDGER_FLUSH_INTERVAL", "SESSION_CACHE_TTL"):
        value = getattr(conf, key)
        if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value < float("inf"):
            messages.append(
                Error(f"MCP_SERVER[{key!r}] must be a number of seconds, 0 or more.", id="mcp_server.E010")
            )
    for key in ("MAX_REQUEST_BYTES", "PAGE_SIZE"):
        value = getattr(conf, key)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            messages.append(Error(f"MCP_SERVER[{key!r}] must be a positive integer.", id="mcp_server.E006"))
    if not settings.DEBUG and "*" in conf.ALLOWED_ORIGINS:
        messages.append(
            Warning(
                "MCP_SERVER['ALLOWED_ORIGINS'] contains '*': any web page can call the MCP endpoint.",
                id="mcp_server.W001",
            )
        )
    return messages


@register(Tags.compatibility)
def check_redis_channel_layer(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """W002: a channels-redis layer whose hosts keep redis-py's default read timeout."""
    if not isinstance(getattr(settings, "MCP_SERVER", {}), dict):
        return []  # E000 says so
    alias = MCPSettings.from_django().CHANNEL_LAYER
    layers = getattr(settings, "CHANNEL_LAYERS", {}) or {}
    layer = layers.get(alias) if isinstance(alias, str) and isinstance(layers, dict) else None
    if not isinstance(layer, dict) or "channels_redis" not in str(layer.get("BACKEND", "")):
        return []
    hosts = (layer.get("CONFIG") or {}).get("hosts") or []
    # No hosts: channels-redis connects to localhost with redis-py's defaults, so that warrants W002 too.
    if hosts and all(isinstance(host, dict) and "socket_timeout" in host for host in hosts):
        return []
    return [
        Warning(
            f"CHANNEL_LAYERS[{alias!r}] uses channels-redis without 'socket_timeout' on its hosts.",
            hint=(
                "redis-py's default read timeout can end the blocking receive of an idle consumer (a slow "
                "tool's POST, a quiet GET stream); give each host as a dict with 'socket_timeout': None."
            ),
            id="mcp_server.W002",
        )
    ]


@register(Tags.compatibility)
def check_ledger_backend(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E011: ``LEDGER_BACKEND`` cannot be built; W006: as configured, it cannot keep its promises."""
    if not isinstance(getattr(settings, "MCP_SERVER", {}), dict):
        return []  # E000 says so
    from .ledger import get_ledger

    try:
        ledger = get_ledger()
    except Exception as exc:
        path = MCPSettings.from_django().LEDGER_BACKEND
        return [Error(f"MCP_SERVER['LEDGER_BACKEND'] {path!r} cannot be used: {exc}", id="mcp_server.E011")]
    return [
        Warning(
            f"The ledger backend cannot keep its promises: {reason}.",
            hint="Use the database ledger, or the cache ledger on a shared cache such as Redis.",
            id="mcp_server.W006",
        )
        for reason in ledger.check()
    ]


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


@register(Tags.compatibility)
def check_bounds(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E012: a bound on stored state has a bad value; E013/W007: ``ERROR_DETAIL``."""
    if not isinstance(getattr(settings, "MCP_SERVER", {}), dict):
        return []  # E000 says so
    conf = MCPSettings.from_django()
    messages: list[CheckMessage] = []
    retention = conf.SESSION_RETENTION
    if (
        not isinstance(retention, int | float)
        or isinstance(retention, bool)
        or not 0 <= retention < float("inf")
    ):
        messages.append(
            Error(
                "MCP_SERVER['SESSION_RETENTION'] must be a number of seconds, 0 or more.",
                id="mcp_server.E012",
            )
        )
    if not _positive_int(conf.MAX_CLIENT_METADATA_BYTES):
        messages.append(
            Error("MCP_SERVER['MAX_CLIENT_METADATA_BYTES'] must be a positive integer.", id="mcp_server.E012")
        )
    if conf.MAX_SESSIONS_PER_CLIENT is not None and not _positive_int(conf.MAX_SESSIONS_PER_CLIENT):
        messages.append(
            Error(
                "MCP_SERVER['MAX_SESSIONS_PER_CLIENT'] must be a positive integer or None (no limit).",
                id="mcp_server.E012",
            )
        )
    if not isinstance(conf.ERROR_DETAIL, bool):
        messages.append(Error("MCP_SERVER['ERROR_DETAIL'] must be True or False.", id="mcp_server.E013"))
    elif conf.ERROR_DETAIL and not settings.DEBUG:
        messages.append(
            Warning(
                "MCP_SERVER['ERROR_DETAIL'] is on outside DEBUG: every MCP client, anonymous ones included, "
                "receives the traceback of a failed request.",
                hint="Turn it off in production; the server's log has the traceback either way.",
                id="mcp_server.W007",
            )
        )
    return messages
