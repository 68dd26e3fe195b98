"""The one ``MCP_SERVER`` settings dict, read through a typed object that follows ``setting_changed``."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, cast

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from .wire.v2026_07_28 import CACHEABLE_METHODS

__all__ = [
    "DEFAULTS",
    "DJANGO_SETTINGS_READ",
    "LOCAL_HOSTS",
    "MCPSettings",
    "allowed_hosts",
    "django_setting",
    "mcp_settings",
    "now",
    "process_cache",
]

DEFAULTS: dict[str, Any] = {
    "SERVER_NAME": "django-mcp",
    "SERVER_VERSION": "0.1.0",
    "SERVER_TITLE": None,
    "SERVER_ICONS": None,
    "INSTRUCTIONS": None,
    "RESPONSE_MODE": "auto",
    "ALLOWED_HOSTS": None,
    "ALLOWED_ORIGINS": [],
    "MAX_REQUEST_BYTES": 4 * 1024 * 1024,
    "REQUEST_TIMEOUT": 300.0,
    "SESSION_IDLE_TIMEOUT": 3600.0,
    "PAGE_SIZE": 100,
    "CHANNEL_LAYER": "default",
    "MIDDLEWARE": [],
    "LEDGER_BACKEND": "mcp_server.stores.ledger.database.DatabaseLedger",
    "LEDGER_CACHE_ALIAS": "default",
    "LEDGER_RETENTION": 3600.0,
    "LEDGER_FLUSH_INTERVAL": 0.05,
    "SESSION_CACHE_TTL": 5.0,
    "LEASE_TIMEOUT": 30.0,
    "SHUTDOWN_GRACE": 5.0,
    "KEEPALIVE_INTERVAL": 15.0,
    "STATELESS": False,
    "AUTHENTICATION_CLASSES": [
        "mcp_server.auth.session.SessionAuthentication",
        "mcp_server.auth.tokens.TokenAuthentication",
    ],
    "ALLOW_ANONYMOUS": True,
    "OAUTH_AUTHORIZATION_SERVERS": [],
    "OAUTH_RESOURCE_METADATA": {},
    "OAUTH_THROTTLE": {"token": 60, "register": 20},
    "OAUTH_REFRESH_GRACE": 10.0,
    "OAUTH_TOKEN_CACHE_TTL": 60.0,
    "UPKEEP_HOOKS": None,
    "OAUTH_CIMD_HOSTS": None,
    "OAUTH_CIMD_PRIVATE_HOSTS": [],
    "SESSION_RETENTION": 3600.0,
    "MAX_CLIENT_METADATA_BYTES": 16 * 1024,
    "MAX_SESSIONS_PER_CLIENT": None,
    "ERROR_DETAIL": False,
    "STORE_TIMEOUT": 5.0,
    "CACHE_HINTS": {  # every cacheable method: not cached, and only server/discover's result is public
        method: {"ttl_ms": 0, "cache_scope": "public" if method == "server/discover" else "private"}
        for method in CACHEABLE_METHODS
    },
    "REQUEST_STATE_MAX_AGE": 3600.0,
    "TASK_TTL": 3600.0,
    "TASK_POLL_INTERVAL": 0.5,
    "TASK_MAX_DURATION": None,
    "MAX_TASKS_PER_OWNER": 20,
    "MAX_TASKS": 500,
    "TASK_STORE_BACKEND": "mcp_server.stores.tasks.database.DatabaseTaskStore",
    "SSE_RETRY_MS": 1000,
    "SSE_POLL_AFTER": None,
    "EVENT_STORE_BACKEND": "mcp_server.stores.events.database.DatabaseEventStore",
    "EVENT_STORE_CACHE_ALIAS": "default",
    "EVENT_RETENTION": 600.0,
    "MAX_STREAM_EVENTS": 1000,
    "STREAM_RECHECK_INTERVAL": 30.0,
    "TELEMETRY": True,
    "RATE_LIMITS": None,
    "RATE_LIMIT_CACHE_ALIAS": "default",
    "RATE_LIMIT_FAIL_OPEN": True,
    "RATE_LIMIT_ERROR_CODE": -31429,
    "RATE_LIMIT_RELOAD": None,
    "RATE_LIMIT_REFUSAL": "error",
    "RATE_LIMIT_HTTP_429": False,
    "RATE_LIMIT_LEASE": 256,
    "QUOTAS": None,
    "METRICS_ACCESS": "staff",
    "TRACE_URL": None,
    "APP_ORIGIN": None,
    "APP_CSP": None,
}
"""Every key ``MCP_SERVER`` understands, with its default. docs/reference/settings.md is made from it."""

RESPONSE_MODES = ("auto", "sse", "json")


@dataclass(frozen=True)
class MCPSettings:
    """Typed view of ``settings.MCP_SERVER`` merged over :data:`DEFAULTS`."""

    SERVER_NAME: str
    SERVER_VERSION: str
    SERVER_TITLE: str | None
    SERVER_ICONS: list[dict[str, Any]] | None
    """``serverInfo.icons`` (MCP ``Icon`` objects: ``src``, ``mimeType``, ``sizes``); on the consent page."""
    INSTRUCTIONS: str | None
    RESPONSE_MODE: str
    ALLOWED_HOSTS: list[str] | None
    ALLOWED_ORIGINS: list[str]
    MAX_REQUEST_BYTES: int
    REQUEST_TIMEOUT: float | None
    SESSION_IDLE_TIMEOUT: float | None
    PAGE_SIZE: int
    CHANNEL_LAYER: str
    MIDDLEWARE: list[str]
    LEDGER_BACKEND: str
    """Import path of the ledger store class (paths from before ``mcp_server.stores`` still accepted)."""
    LEDGER_CACHE_ALIAS: str
    LEDGER_RETENTION: float
    LEDGER_FLUSH_INTERVAL: float
    SESSION_CACHE_TTL: float
    LEASE_TIMEOUT: float
    SHUTDOWN_GRACE: float
    KEEPALIVE_INTERVAL: float | None
    """Seconds of silence after which a 2026-07-28 stream gets a ``: ping`` comment (``None``: never)."""
    STATELESS: bool
    AUTHENTICATION_CLASSES: list[str]
    ALLOW_ANONYMOUS: bool
    OAUTH_AUTHORIZATION_SERVERS: list[str]
    OAUTH_RESOURCE_METADATA: dict[str, Any]
    OAUTH_THROTTLE: dict[str, int] | None
    """Requests per minute per client address to the site's own token and registration endpoints
    (``mcp_server.oauth``); ``None`` or a missing key: no limit."""
    OAUTH_REFRESH_GRACE: float
    """Seconds a second refresh with the same refresh token gets the first one's answer (``0``: none)."""
    OAUTH_TOKEN_CACHE_TTL: float
    """Seconds an OAuth access token's row is kept in the default cache (``0``: read on every request)."""
    UPKEEP_HOOKS: list[str] | None
    """Import paths of callables each upkeep round calls (``None``: those the installed apps add)."""
    OAUTH_CIMD_HOSTS: list[str] | None
    """Hosts whose Client ID Metadata Documents are accepted (``ALLOWED_HOSTS`` syntax); ``None``: any."""
    OAUTH_CIMD_PRIVATE_HOSTS: list[str]
    """CIMD hosts that may resolve to private or loopback addresses (tests, an intranet); default none."""
    SESSION_RETENTION: float
    MAX_CLIENT_METADATA_BYTES: int
    MAX_SESSIONS_PER_CLIENT: int | None
    ERROR_DETAIL: bool
    STORE_TIMEOUT: float
    CACHE_HINTS: dict[str, dict[str, Any]]
    REQUEST_STATE_MAX_AGE: float
    """Seconds a signed ``requestState`` (an ``input_required`` round at 2026-07-28) stays valid."""
    TASK_TTL: float | None
    """Seconds a task is kept after its creation (its ``ttlMs``; ``None``: until pruned by hand)."""
    TASK_POLL_INTERVAL: float | None
    """Seconds between two ``tasks/get`` a client is told to wait (``pollIntervalMs``)."""
    TASK_MAX_DURATION: float | None
    """Seconds a task may stay live (working or input_required) before it fails (``None``: its TTL)."""
    MAX_TASKS_PER_OWNER: int | None
    """Live tasks one owner may hold (an anonymous owner counted by address; ``None``: no limit)."""
    MAX_TASKS: int | None
    """Live tasks the whole site may hold (every worker, every server; ``None``: no limit)."""
    TASK_STORE_BACKEND: str
    """Import path of the task store class (the database's; a cache task store is not offered)."""
    SSE_RETRY_MS: int | None
    """The ``retry:`` hint (milliseconds) of a handshake-era stream's priming event (2025-11-25 and later)."""
    SSE_POLL_AFTER: float | None
    """Seconds after which a handshake-era POST stream is closed so that the client polls with
    ``Last-Event-ID`` (SEP-1699); the request keeps running (``None``: streams stay open)."""
    EVENT_STORE_BACKEND: str
    """Import path of the event store that keeps SSE events for ``Last-Event-ID`` replay."""
    EVENT_STORE_CACHE_ALIAS: str
    EVENT_RETENTION: float
    """Seconds a stream's events are kept for replay."""
    MAX_STREAM_EVENTS: int
    """Events kept per stream (older notifications are trimmed; responses are kept)."""
    STREAM_RECHECK_INTERVAL: float
    """Seconds between two checks of a long-lived stream's credential (GET stream, ``subscriptions/listen``):
    a stream whose credential no longer authenticates is ended."""
    TELEMETRY: bool
    """OpenTelemetry spans and metrics of every request, when ``opentelemetry-api`` is installed."""
    RATE_LIMITS: list[dict[str, Any]] | None
    """Rate limits by who and what (``mcp_server.core.limit_rules``; ``None``: no limits)."""
    RATE_LIMIT_CACHE_ALIAS: str
    """The cache that keeps the rate-limit counters (Redis: shared by every worker and exact)."""
    RATE_LIMIT_FAIL_OPEN: bool
    """Whether a limited request runs when the counters' cache cannot be reached (``False``: refused)."""
    RATE_LIMIT_ERROR_CODE: int
    """The JSON-RPC error code of a rate-limited request's refusal."""
    RATE_LIMIT_RELOAD: float | None
    """Seconds between two reads of the admin's rate limits by each worker (``None``: rows not read)."""
    RATE_LIMIT_REFUSAL: str
    """How a refused ``tools/call`` is answered: ``"error"`` (the JSON-RPC error, as every other refused
    request) or ``"tool_result"`` (a result with ``isError: true`` whose text says when to retry)."""
    RATE_LIMIT_HTTP_429: bool
    """Whether the error of a single refused request answered as JSON carries HTTP 429 and ``Retry-After``."""
    RATE_LIMIT_LEASE: int
    """The most calls of one window a worker adds to its shared count in one round trip and lets through
    without asking again (``mcp_server.protocol.limit_leases``: only while the window has over 256 times
    that many left; ``1``: a round trip per call)."""
    QUOTAS: list[dict[str, Any]] | None
    """Daily or monthly quotas by who and what (``mcp_server.core.limit_rules``; ``None``: no quotas)."""
    """OpenTelemetry spans and metrics of every request, when ``opentelemetry-api`` is installed; Prometheus
    metrics, when ``prometheus_client`` is."""
    METRICS_ACCESS: str | dict[str, Any]
    """Who may read ``/metrics`` (``mcp_server.metrics``): ``"staff"`` (a signed-in active staff user),
    ``{"token": "<secret>"}`` (``Authorization: Bearer <secret>``) or ``{"ips": [addresses or networks]}``."""
    TRACE_URL: str | None
    """Where the admin links a request's trace: a URL with ``{trace_id}`` (and maybe ``{span_id}``) in it;
    ``None``: the id alone is shown."""
    APP_ORIGIN: str | None
    """The site's origin (``https://library.example``) in MCP Apps views: where a relative ``STATIC_URL`` or
    ``MEDIA_URL`` points, and what their CSP ``resourceDomains`` allow (``None``: the origin of the
    ``resources/read`` request; over stdio, none)."""
    APP_CSP: dict[str, list[str]] | None
    """The ``_meta.ui.csp`` of every view (``connectDomains``, ``resourceDomains``, ``frameDomains``,
    ``baseUriDomains``); ``None``: derived from ``STATIC_URL`` and ``MEDIA_URL``, no connections."""
    unknown_keys: tuple[str, ...] = field(default=())

    @classmethod
    def from_django(cls) -> MCPSettings:
        """Build the settings object from ``django.conf.settings``."""
        user: dict[str, Any] = dict(getattr(settings, "MCP_SERVER", None) or {})
        known = {f.name for f in fields(cls)} - {"unknown_keys"}
        merged = {**DEFAULTS, **{k: v for k, v in user.items() if k in known}}
        unknown = tuple(sorted(k for k in user if k not in known))
        return cls(**merged, unknown_keys=unknown)


class _LazySettings:
    """Proxy that rebuilds :class:`MCPSettings` after ``setting_changed`` (as in tests)."""

    _cached: MCPSettings | None = None

    def get(self) -> MCPSettings:
        if self._cached is None:
            self._cached = MCPSettings.from_django()
        return self._cached

    def reset(self) -> None:
        self.__dict__.clear()  # the settings object and every value read from it

    def django(self, name: str) -> Any:
        """``django.conf.settings.<name>``, kept like the package's own values (forgotten on a change of
        one of :data:`DJANGO_SETTINGS_READ`)."""
        key = "django:" + name
        try:
            return self.__dict__[key]
        except KeyError:
            value = self.__dict__[key] = getattr(settings, name)
            return value

    def cache(self, alias: str) -> Any:
        """The process's one client of the cache ``alias`` (forgotten on a change of ``CACHES``)."""
        key = "cache:" + alias
        try:
            return self.__dict__[key]
        except KeyError:
            from django.core.cache import caches

            value = self.__dict__[key] = caches[alias]
            return value

    def __getattr__(self, name: str) -> Any:
        # Kept on the proxy once read, so that the next read is a plain attribute (the request path reads
        # a dozen settings per call); ``reset`` forgets them all.
        value = getattr(self.get(), name)
        self.__dict__[name] = value
        return value


mcp_settings: MCPSettings = cast(MCPSettings, _LazySettings())
"""The live settings (typed as :class:`MCPSettings`); attribute access reads the current value or default."""


LOCAL_HOSTS = [".localhost", "localhost", "127.0.0.1", "[::1]"]
"""The hosts a ``DEBUG`` site allows when no host is configured."""


def django_setting(name: str) -> Any:
    """One of Django's settings (one of :data:`DJANGO_SETTINGS_READ`), read once per change: the request
    path reads a few on every call, and each read through ``django.conf.settings`` costs a lazy lookup."""
    return cast(_LazySettings, mcp_settings).django(name)


def process_cache(alias: str) -> Any:
    """One client of the Django cache ``alias`` for the whole process. ``caches[alias]`` in async code makes
    a client per task (Django's handler keeps them per context), each with a new connection to Redis: a
    connect per request, which was 6x the CPU of an echo call with one rate limit."""
    return cast(_LazySettings, mcp_settings).cache(alias)


def now() -> datetime:
    """``django.utils.timezone.now()``, with ``USE_TZ`` read once per change."""
    return datetime.now(UTC) if django_setting("USE_TZ") else datetime.now()


def allowed_hosts() -> list[str]:
    """``MCP_SERVER["ALLOWED_HOSTS"]``, else Django's ``ALLOWED_HOSTS``, with localhost under ``DEBUG``."""
    configured = mcp_settings.ALLOWED_HOSTS
    hosts = list(configured if configured is not None else django_setting("ALLOWED_HOSTS"))
    if django_setting("DEBUG") and not hosts:
        hosts = LOCAL_HOSTS
    return hosts


DJANGO_SETTINGS_READ = frozenset(
    {"ALLOWED_HOSTS", "DEBUG", "USE_TZ", "SESSION_COOKIE_NAME", "STATIC_URL", "MEDIA_URL"}
)
"""The Django settings :func:`django_setting` keeps (a change of any, or of ``MCP_SERVER``, forgets all)."""


@receiver(setting_changed)
def _reset_on_change(*, setting: str, **kwargs: Any) -> None:
    if setting in ("MCP_SERVER", "CACHES") or setting in DJANGO_SETTINGS_READ:
        cast(_LazySettings, mcp_settings).reset()
