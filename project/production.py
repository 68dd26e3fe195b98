"""Production settings of the demo site: what docs/howto/deploy.md tells a site to add.

``DJANGO_SETTINGS_MODULE=project.production`` with ``DATABASE_URL`` (PostgreSQL), ``REDIS_URL`` (the channel
layer and the cache: ``project.settings`` switches both), ``DJANGO_SECRET_KEY`` and ``DJANGO_ALLOWED_HOSTS``;
``DJANGO_STATIC_ROOT`` (default ``staticfiles/``) is where ``manage.py collectstatic`` puts the static files
that WhiteNoise serves. Behind a TLS-terminating reverse proxy that sets ``X-Forwarded-Proto``.
"""

from __future__ import annotations

import os
from pathlib import Path

from project.settings import *  # noqa: F403
from project.settings import BASE_DIR, MIDDLEWARE

DEBUG = False

# Static files (the admin's CSS, the live page's script) from the app server itself, through WhiteNoise.
MIDDLEWARE = [MIDDLEWARE[0], "whitenoise.middleware.WhiteNoiseMiddleware", *MIDDLEWARE[1:]]
STATIC_ROOT = Path(os.environ.get("DJANGO_STATIC_ROOT", BASE_DIR / "staticfiles"))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

# HTTPS ends at the proxy, which says so in X-Forwarded-Proto (``manage.py check --deploy`` is clean).
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = True
SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_HSTS_SECONDS", "3600"))
SECURE_HSTS_INCLUDE_SUBDOMAINS = True  # only if every subdomain is served over HTTPS too
SECURE_HSTS_PRELOAD = True  # allows (does not make) a submission to the browsers' preload list
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True

# The authorization server (MCP_DEMO_OAUTH) accepts http redirect URIs on loopback hosts only (RFC 8252: VS
# Code, Claude Code, the MCP Inspector), as mcp_server.oauth checks; DOT's deploy check cannot tell.
SILENCED_SYSTEM_CHECKS = ["oauth2_provider.W008"]
