"""System checks for ``MCP_SERVER`` (ids ``mcp_server.E0xx`` / ``W0xx``, listed in the README)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.utils.module_loading import import_string

from .conf import RESPONSE_MODES, MCPSettings

__all__ = ["check_settings"]


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


@register(Tags.compatibility)
def check_redis_channel_layer(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """W002: a channels-redis layer whose hosts wait on Redis for ever, or too briefly for its receive."""
    if not isinstance(getattr(settings, "MCP_SERVER", {}), dict):
        return []  # E000 says so
    alias = MCPSettings.from_django().CHANNEL_LAYER
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


# -- I11: faults are bounded ---------------------------------------------------------------------------------

LAYER_RECEIVE_BLOCK = 5.0
"""Seconds channels-redis blocks in each receive (``BZPOPMIN``): a host's read timeout must exceed it."""


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < float("inf")


def _url_options(address: Any) -> dict[str, str]:
    """The query options of a Redis URL (``redis://host/0?socket_timeout=15``)."""
    from urllib.parse import parse_qsl, urlsplit

    return dict(parse_qsl(urlsplit(address).query)) if isinstance(address, str) else {}


def _seconds(value: Any) -> float | None:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return None if isinstance(value, bool) or not _number(seconds) else seconds


def _layer_host_bounded(host: Any) -> bool:
    options = _url_options(host.get("address") if isinstance(host, dict) else host)
    if isinstance(host, dict):
        options = {**options, **host}
    read = _seconds(options.get("socket_timeout"))
    return (
        read is not None
        and read > LAYER_RECEIVE_BLOCK
        and _seconds(options.get("socket_connect_timeout")) is not None
    )


@register(Tags.compatibility)
def check_store_timeout(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E014: ``STORE_TIMEOUT`` is not a positive number below ``REQUEST_TIMEOUT``."""
    if not isinstance(getattr(settings, "MCP_SERVER", {}), dict):
        return []  # E000 says so
    conf = MCPSettings.from_django()
    value, deadline = conf.STORE_TIMEOUT, conf.REQUEST_TIMEOUT
    if not _number(value):
        return [
            Error("MCP_SERVER['STORE_TIMEOUT'] must be a positive number of seconds.", id="mcp_server.E014")
        ]
    if deadline is not None and _number(deadline) and value >= deadline:
        return [
            Error(
                f"MCP_SERVER['STORE_TIMEOUT'] ({value:g}s) must be below REQUEST_TIMEOUT ({deadline:g}s).",
                hint="A request waiting on a store must be answered with an error before its deadline.",
                id="mcp_server.E014",
            )
        ]
    return []


@register(Tags.compatibility)
def check_request_state_max_age(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E016: ``REQUEST_STATE_MAX_AGE`` is not a positive number of seconds."""
    if not isinstance(getattr(settings, "MCP_SERVER", {}), dict):
        return []  # E000 says so
    if _number(MCPSettings.from_django().REQUEST_STATE_MAX_AGE):
        return []
    return [
        Error(
            "MCP_SERVER['REQUEST_STATE_MAX_AGE'] must be a positive number of seconds.",
            hint="It bounds how long a client may take to answer an input_required round.",
            id="mcp_server.E016",
        )
    ]


@register(Tags.compatibility)
def check_task_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E017: ``TASK_TTL`` or ``TASK_POLL_INTERVAL`` is neither ``None`` nor a positive number of seconds."""
    if not isinstance(getattr(settings, "MCP_SERVER", {}), dict):
        return []  # E000 says so
    current = MCPSettings.from_django()
    return [
        Error(
            f"MCP_SERVER['{key}'] must be None or a positive number of seconds.",
            hint="Tasks (2026-07-28 tasks extension): how long a task is kept, how often clients poll it.",
            id="mcp_server.E017",
        )
        for key in ("TASK_TTL", "TASK_POLL_INTERVAL")
        if getattr(current, key) is not None and not _number(getattr(current, key))
    ]


@register(Tags.compatibility)
def check_task_bounds(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E030 ``TASK_MAX_DURATION``, E031 ``MAX_TASKS_PER_OWNER`` / ``MAX_TASKS`` malformed; W030 no task ever
    times out; W031 a task may stay live past its advertised TTL."""
    if not isinstance(getattr(settings, "MCP_SERVER", {}), dict):
        return []  # E000 says so
    conf = MCPSettings.from_django()
    messages: list[CheckMessage] = []
    duration, ttl = conf.TASK_MAX_DURATION, conf.TASK_TTL
    if duration is not None and not _number(duration):
        messages.append(
            Error(
                "MCP_SERVER['TASK_MAX_DURATION'] must be None (the task's TTL) or a positive number of "
                "seconds.",
                id="mcp_server.E030",
            )
        )
    for key in ("MAX_TASKS_PER_OWNER", "MAX_TASKS"):
        value = getattr(conf, key)
        if value is not None and not _positive_int(value):
            messages.append(
                Error(
                    f"MCP_SERVER['{key}'] must be a positive integer or None (no limit).",
                    id="mcp_server.E031",
                )
            )
    if duration is None and ttl is None:
        messages.append(
            Warning(
                "MCP_SERVER['TASK_MAX_DURATION'] and TASK_TTL are both None: a task never times out, and one "
                "parked input_required holds its worker's memory for ever.",
                hint="Set TASK_MAX_DURATION (seconds).",
                id="mcp_server.W030",
            )
        )
    elif duration is not None and ttl is not None and _number(duration) and _number(ttl) and duration > ttl:
        messages.append(
            Warning(
                f"MCP_SERVER['TASK_MAX_DURATION'] ({duration:g}s) exceeds TASK_TTL ({ttl:g}s): a task may "
                "stay live past the ttlMs it advertises.",
                id="mcp_server.W031",
            )
        )
    return messages


REDIS_CACHES = ("django.core.cache.backends.redis.RedisCache", "django_redis.cache.RedisCache")


@register(Tags.compatibility)
def check_redis_cache_timeouts(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """W008: the Redis cache MCP uses (``LEDGER_CACHE_ALIAS``) has no socket timeouts."""
    if not isinstance(getattr(settings, "MCP_SERVER", {}), dict):
        return []  # E000 says so
    alias = MCPSettings.from_django().LEDGER_CACHE_ALIAS
    caches = getattr(settings, "CACHES", {}) or {}
    cache = caches.get(alias) if isinstance(alias, str) and isinstance(caches, dict) else None
    if not isinstance(cache, dict) or str(cache.get("BACKEND", "")) not in REDIS_CACHES:
        return []
    options = cache.get("OPTIONS") or {}
    if isinstance(options, dict) and all(
        _seconds(options.get(key)) is not None for key in ("socket_timeout", "socket_connect_timeout")
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


CACHEABLE_METHODS = (
    "server/discover",
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
)


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


@register(Tags.compatibility)
def check_cache_hints(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E015: ``CACHE_HINTS`` (2026-07-28 ``ttlMs``/``cacheScope`` per method) is malformed."""
    if not isinstance(getattr(settings, "MCP_SERVER", {}), dict):
        return []  # E000 says so
    hints = MCPSettings.from_django().CACHE_HINTS
    if not isinstance(hints, dict):
        return [Error("MCP_SERVER['CACHE_HINTS'] must be a dict of method -> hint.", id="mcp_server.E015")]
    problems = [p for m, h in hints.items() if (p := _cache_hint_problem(m, h)) is not None]
    return [Error(f"MCP_SERVER['CACHE_HINTS']: {p}.", id="mcp_server.E015") for p in problems]


@register(Tags.compatibility)
def check_event_store(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E020: ``EVENT_STORE_BACKEND`` cannot be imported; E021: a stream setting is out of range."""
    if not isinstance(getattr(settings, "MCP_SERVER", {}), dict):
        return []  # E000 says so
    conf = MCPSettings.from_django()
    messages: list[CheckMessage] = []
    try:
        if not isinstance(conf.EVENT_STORE_BACKEND, str):
            raise ImportError("not an import path")
        import_string(conf.EVENT_STORE_BACKEND)
    except ImportError as exc:
        messages.append(
            Error(
                f"MCP_SERVER['EVENT_STORE_BACKEND'] {conf.EVENT_STORE_BACKEND!r} cannot be imported: {exc}",
                hint="Use mcp_server.ledger.events.DatabaseEventStore or CacheEventStore.",
                id="mcp_server.E020",
            )
        )
    problems = []
    if _seconds(conf.EVENT_RETENTION) is None:
        problems.append("EVENT_RETENTION must be a positive number of seconds")
    limit = conf.MAX_STREAM_EVENTS
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        problems.append("MAX_STREAM_EVENTS must be an integer >= 1")
    retry = conf.SSE_RETRY_MS
    if retry is not None and (isinstance(retry, bool) or not isinstance(retry, int) or retry < 0):
        problems.append("SSE_RETRY_MS must be None or an integer >= 0 (milliseconds)")
    if conf.SSE_POLL_AFTER is not None and _seconds(conf.SSE_POLL_AFTER) is None:
        problems.append("SSE_POLL_AFTER must be None or a positive number of seconds")
    messages += [Error(f"MCP_SERVER: {p}.", id="mcp_server.E021") for p in problems]
    return messages
