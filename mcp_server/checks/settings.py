"""Checks of the ``MCP_SERVER`` dict itself and its request, session and cache-hint settings.

- ``mcp_server.E000`` ``MCP_SERVER`` is not a dict (every other ``MCP_SERVER`` check is then skipped)
- ``E001`` unknown key, ``E002`` ``RESPONSE_MODE``, ``E003`` ``CHANNEL_LAYER``, ``E004`` ``MIDDLEWARE``,
  ``E005``/``E006``/``E010`` timeouts, sizes and intervals, ``E040`` ``STREAM_RECHECK_INTERVAL``, ``E041``
  ``UPKEEP_HOOKS``, ``W001`` ``ALLOWED_ORIGINS`` contains ``*``
- ``E012`` a bound on stored state, ``E013``/``W007`` ``ERROR_DETAIL``, ``E014`` ``STORE_TIMEOUT``, ``E015``
  ``CACHE_HINTS``, ``E016`` ``REQUEST_STATE_MAX_AGE``, ``E050`` ``TELEMETRY``
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.utils.module_loading import import_string

from ..conf import RESPONSE_MODES, MCPSettings
from ..wire.v2026_07_28 import CACHEABLE_METHODS
from .base import mcp_check, number, positive_int

__all__ = [
    "check_bounds",
    "check_cache_hints",
    "check_request_state_max_age",
    "check_settings",
    "check_store_timeout",
    "check_telemetry",
]


def _import_paths(key: str, paths: Any, check_id: str) -> list[CheckMessage]:
    """E004 (``MIDDLEWARE``), E041 (``UPKEEP_HOOKS``): not a list of import paths that import."""
    if not isinstance(paths, list | tuple):
        return [Error(f"MCP_SERVER[{key!r}] must be a list of import paths.", id=check_id)]
    messages: list[CheckMessage] = []
    for path in paths:
        try:
            if not isinstance(path, str):
                raise ImportError("not an import path")
            import_string(path)
        except ImportError as exc:
            problem = f"MCP_SERVER[{key!r}] entry {path!r} cannot be imported: {exc}"
            messages.append(Error(problem, id=check_id))
    return messages


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
                hint="See the settings reference: docs/reference/settings.md.",
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
    messages += _import_paths("MIDDLEWARE", conf.MIDDLEWARE, "mcp_server.E004")
    if conf.UPKEEP_HOOKS is not None:
        messages += _import_paths("UPKEEP_HOOKS", conf.UPKEEP_HOOKS, "mcp_server.E041")
    for key in ("REQUEST_TIMEOUT", "SESSION_IDLE_TIMEOUT", "KEEPALIVE_INTERVAL"):
        value = getattr(conf, key)
        if value is not None and (
            not isinstance(value, int | float) or isinstance(value, bool) or value <= 0
        ):
            messages.append(
                Error(f"MCP_SERVER[{key!r}] must be a positive number or None.", id="mcp_server.E005")
            )
    for key in ("LEDGER_FLUSH_INTERVAL", "SESSION_CACHE_TTL", "OAUTH_REFRESH_GRACE", "OAUTH_TOKEN_CACHE_TTL"):
        value = getattr(conf, key)
        if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value < float("inf"):
            messages.append(
                Error(f"MCP_SERVER[{key!r}] must be a number of seconds, 0 or more.", id="mcp_server.E010")
            )
    for key in ("MAX_REQUEST_BYTES", "PAGE_SIZE"):
        value = getattr(conf, key)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            messages.append(Error(f"MCP_SERVER[{key!r}] must be a positive integer.", id="mcp_server.E006"))
    recheck = conf.STREAM_RECHECK_INTERVAL
    if not isinstance(recheck, int | float) or isinstance(recheck, bool) or not 0 < recheck < float("inf"):
        messages.append(
            Error(
                "MCP_SERVER['STREAM_RECHECK_INTERVAL'] must be a positive number of seconds.",
                hint="Open streams check their credential this often (default 30).",
                id="mcp_server.E040",
            )
        )
    if not settings.DEBUG and "*" in conf.ALLOWED_ORIGINS:
        messages.append(
            Warning(
                "MCP_SERVER['ALLOWED_ORIGINS'] contains '*': any web page can call the MCP endpoint.",
                id="mcp_server.W001",
            )
        )
    return messages


@mcp_check
def check_bounds(conf: MCPSettings) -> list[CheckMessage]:
    """E012: a bound on stored state has a bad value; E013/W007: ``ERROR_DETAIL``."""
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
    if not positive_int(conf.MAX_CLIENT_METADATA_BYTES):
        messages.append(
            Error("MCP_SERVER['MAX_CLIENT_METADATA_BYTES'] must be a positive integer.", id="mcp_server.E012")
        )
    if conf.MAX_SESSIONS_PER_CLIENT is not None and not positive_int(conf.MAX_SESSIONS_PER_CLIENT):
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


@mcp_check
def check_store_timeout(conf: MCPSettings) -> list[CheckMessage]:
    """E014: ``STORE_TIMEOUT`` is not a positive number below ``REQUEST_TIMEOUT``."""
    value, deadline = conf.STORE_TIMEOUT, conf.REQUEST_TIMEOUT
    if not number(value):
        return [
            Error("MCP_SERVER['STORE_TIMEOUT'] must be a positive number of seconds.", id="mcp_server.E014")
        ]
    if deadline is not None and number(deadline) and value >= deadline:
        return [
            Error(
                f"MCP_SERVER['STORE_TIMEOUT'] ({value:g}s) must be below REQUEST_TIMEOUT ({deadline:g}s).",
                hint="A request waiting on a store must be answered with an error before its deadline.",
                id="mcp_server.E014",
            )
        ]
    return []


@mcp_check
def check_request_state_max_age(conf: MCPSettings) -> list[CheckMessage]:
    """E016: ``REQUEST_STATE_MAX_AGE`` is not a positive number of seconds."""
    if number(conf.REQUEST_STATE_MAX_AGE):
        return []
    return [
        Error(
            "MCP_SERVER['REQUEST_STATE_MAX_AGE'] must be a positive number of seconds.",
            hint="It bounds how long a client may take to answer an input_required round.",
            id="mcp_server.E016",
        )
    ]


def _cache_hint_problem(method: Any, hint: Any) -> str | None:
    if method not in CACHEABLE_METHODS:
        return f"{method!r} is not a method with caching hints ({', '.join(CACHEABLE_METHODS)})"
    if not isinstance(hint, dict) or set(hint) - {"ttl_ms", "cache_scope"}:
        return f"{method!r} must map to a dict with 'ttl_ms' and/or 'cache_scope'"
    ttl = hint.get("ttl_ms", 0)
    if isinstance(ttl, bool) or not isinstance(ttl, int) or ttl < 0:
        return f"{method!r}: ttl_ms must be an integer >= 0 (milliseconds)"
    if hint.get("cache_scope", "private") not in ("public", "private"):
        return f"{method!r}: cache_scope must be 'public' or 'private'"
    return None


@mcp_check
def check_cache_hints(conf: MCPSettings) -> list[CheckMessage]:
    """E015: ``CACHE_HINTS`` (2026-07-28 ``ttlMs``/``cacheScope`` per method) is malformed."""
    hints = conf.CACHE_HINTS
    if not isinstance(hints, dict):
        return [Error("MCP_SERVER['CACHE_HINTS'] must be a dict of method -> hint.", id="mcp_server.E015")]
    problems = [p for m, h in hints.items() if (p := _cache_hint_problem(m, h)) is not None]
    return [Error(f"MCP_SERVER['CACHE_HINTS']: {p}.", id="mcp_server.E015") for p in problems]


@mcp_check
def check_telemetry(conf: MCPSettings) -> list[CheckMessage]:
    """E050: ``TELEMETRY`` is not a boolean."""
    if isinstance(conf.TELEMETRY, bool):
        return []
    return [Error("MCP_SERVER['TELEMETRY'] must be True or False.", id="mcp_server.E050")]
