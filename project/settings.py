"""Settings of the demo site.

Embedded defaults need no service: SQLite, the in-memory channel layer and the local-memory cache.
Environment variables switch them without code changes:

- ``DATABASE_URL``: e.g. ``postgres://postgres@127.0.0.1:5432/mcp`` (default: SQLite file ``db.sqlite3``)
- ``REDIS_URL``: e.g. ``redis://127.0.0.1:6379/0``; selects channels-redis and the Redis cache
- ``MCP_RESPONSE_MODE``: ``auto`` (default), ``sse`` or ``json``
- ``DJANGO_DEBUG``: ``1`` (default) or ``0``; ``DJANGO_ALLOWED_HOSTS``: comma-separated
- ``MCP_DEMO_OAUTH``: ``1`` (default when django-oauth-toolkit is installed): the site is the OAuth
  authorization server of ``/mcp`` and ``/staff/mcp``, and MCP clients sign in as a user of the site
  (docs/howto/oauth.md); ``0``: anonymous access, as before
"""

from __future__ import annotations

import os
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "demo-only-insecure-secret-key-change-me")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = [h for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "").split(",") if h]

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "mcp_server",
    "project.catalogue",
    "project.conformance",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "project.urls"
ASGI_APPLICATION = "project.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}", conn_max_age=600, conn_health_checks=True
    ),
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # A server that stops answering must not hold a thread for ever (I11): give up connecting after 3 s, and
    # detect a vanished host with keepalives and tcp_user_timeout (ms). A stopped server keeps answering TCP,
    # so a query already sent waits until it resumes: MCP's own waits give up after STORE_TIMEOUT.
    DATABASES["default"]["OPTIONS"] = {
        "connect_timeout": 3,
        "keepalives": 1,
        "keepalives_idle": 30,
        "keepalives_interval": 5,
        "keepalives_count": 3,
        "tcp_user_timeout": 30_000,
    }

REDIS_URL = os.environ.get("REDIS_URL")
CHANNEL_LAYERS: dict[str, Any]
if REDIS_URL:
    from redis.asyncio.retry import Retry as AsyncRetry
    from redis.backoff import NoBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.retry import Retry

    # socket_timeout comfortably above 5 s: channels-redis blocks up to 5 s in each receive, and redis-py 8's
    # default read timeout of 5 s cut it short, a TimeoutError that killed every consumer idle that long (a
    # slow tool's POST). Yet finite, as the connect timeout: a Redis that stops answering fails the waits on
    # it instead of hanging them (I11; mcp_server.W002, W007). One retry on a broken connection (a pooled
    # one a restarted Redis closed), never on a timeout: a command that timed out may still run later.
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                "hosts": [
                    {
                        "address": REDIS_URL,
                        "socket_timeout": 15,
                        "socket_connect_timeout": 3,
                        "retry": AsyncRetry(NoBackoff(), 1, (RedisConnectionError,)),
                    }
                ]
            },
        }
    }
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "OPTIONS": {
                "socket_timeout": 5,
                "socket_connect_timeout": 3,
                "retry": Retry(NoBackoff(), 1, (RedisConnectionError,)),
            },
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

MCP_SERVER: dict[str, Any] = {
    "SERVER_NAME": "django-mcp-demo",
    "SERVER_TITLE": "Django MCP demo: a library catalogue",
    "INSTRUCTIONS": "A library catalogue. Search books, read them as resources, reserve copies.",
    "RESPONSE_MODE": os.environ.get("MCP_RESPONSE_MODE", "auto"),
    # One low limit, so that a newcomer sees a refusal and its retry hint (docs/howto/rate-limits.md): the
    # sixth get_book within a minute, signed in or not, is refused with -31429 and data.retryAfter.
    "RATE_LIMITS": [
        {"per": "user", "target": "tool:get_book", "rate": "5/minute", "name": "demo: get_book"},
        {
            "per": "address",
            "target": "tool:get_book",
            "rate": "5/minute",
            "name": "demo: get_book, anonymous",
        },
    ],
    # /metrics (project/urls.py) for a Prometheus on this machine; a site behind a proxy names its scraper.
    "METRICS_ACCESS": {"ips": ["127.0.0.1", "::1"]},
    # The admin links each request to its trace, e.g. MCP_TRACE_URL=http://127.0.0.1:16686/trace/{trace_id}
    "TRACE_URL": os.environ.get("MCP_TRACE_URL") or None,
}

# The site as the OAuth authorization server of its MCP endpoints (the ``oauth`` extra): two apps, the URLs
# in project/urls.py, and the OAuth token class before the ``mcp_`` token class.
DEMO_OAUTH = os.environ.get("MCP_DEMO_OAUTH", "1" if find_spec("oauth2_provider") else "0") == "1"
if DEMO_OAUTH:
    INSTALLED_APPS += ["oauth2_provider", "mcp_server.oauth"]
    MCP_SERVER["ALLOW_ANONYMOUS"] = False
    MCP_SERVER["AUTHENTICATION_CLASSES"] = [
        "mcp_server.auth.session.SessionAuthentication",
        "mcp_server.oauth.authentication.OAuthTokenAuthentication",
        "mcp_server.auth.tokens.TokenAuthentication",
    ]
    LOGIN_URL = "login"  # project/urls.py

AUTH_PASSWORD_VALIDATORS: list[dict[str, str]] = []
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"mcp_server": {"handlers": ["console"], "level": os.environ.get("MCP_LOG_LEVEL", "WARNING")}},
}
