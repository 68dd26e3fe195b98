"""Settings for the test suite: the demo site plus a test app, with overrides from the environment.

``MCP_TEST_OVERRIDES`` (JSON) is merged into ``MCP_SERVER``, so each live server a test starts can run
with its own settings (response mode, limits, deadlines).
"""

from __future__ import annotations

import json
import os
import tempfile

# The demo's own OAuth authorization server (project/settings.py) stays off for the suite, and for the
# servers it starts, unless a test asks for it (tests/end_to_end/oauth/: MCP_DEMO_OAUTH=1 in the server's
# environment).
os.environ.setdefault("MCP_DEMO_OAUTH", "0")

from project.settings import *  # noqa: F403
from project.settings import (
    CACHES,
    CHANNEL_LAYERS,
    DATABASES,
    INSTALLED_APPS,
    MCP_SERVER,
    REDIS_URL,
)

INSTALLED_APPS = [*INSTALLED_APPS, "tests.testapp", "tests.authapp", "tests.drfapp"]
# The demo's one low rate limit (project/settings.py) is left out: tests set their own.
DEMO_RATE_LIMITS = MCP_SERVER["RATE_LIMITS"]
MCP_SERVER = {
    **{key: value for key, value in MCP_SERVER.items() if key != "RATE_LIMITS"},
    **json.loads(os.environ.get("MCP_TEST_OVERRIDES", "{}")),
}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# ``MCP_TEST_REDIS_PREFIX``: a test session's own namespace in the shared Redis (channel layer and cache).
if REDIS_URL and os.environ.get("MCP_TEST_REDIS_PREFIX"):
    CHANNEL_LAYERS["default"]["CONFIG"]["prefix"] = os.environ["MCP_TEST_REDIS_PREFIX"]
    CACHES["default"]["KEY_PREFIX"] = os.environ["MCP_TEST_REDIS_PREFIX"]

# ``MCP_TEST_LIMITS_CACHE``: a cache ``limits`` (a JSON ``CACHES`` entry) a live server may count its rate
# limits in (``RATE_LIMIT_CACHE_ALIAS``): tests/end_to_end/limits/test_cache_faults.py points it at a dead
# or a stalled Redis.
if os.environ.get("MCP_TEST_LIMITS_CACHE"):
    CACHES["limits"] = json.loads(os.environ["MCP_TEST_LIMITS_CACHE"])

# The test database on SQLite is a file, not Django's default shared-cache in-memory database: the ledger
# writer has a connection (a thread) of its own, and shared-cache SQLite refuses a second connection's write
# at once ("database table is locked") instead of waiting as a file database does with its busy timeout.
# ``MCP_TEST_SQLITE_OPTIONS``: the SQLite ``OPTIONS`` of a live server (JSON; ``{}`` is Django's defaults).
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3" and "MCP_TEST_SQLITE_OPTIONS" in os.environ:
    DATABASES["default"]["OPTIONS"] = json.loads(os.environ["MCP_TEST_SQLITE_OPTIONS"])
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["TEST"] = {
        "NAME": os.path.join(tempfile.gettempdir(), f"mcp-test-{os.getpid()}.sqlite3"),
    }

# ``MCP_TEST_SPANS``: a live server records its spans with the OpenTelemetry SDK, one JSON line each, in that
# file (tests/telemetry/span_file.py), as a site that owns the SDK would export them.
if os.environ.get("MCP_TEST_SPANS"):
    from tests.telemetry.span_file import record_spans

    record_spans(os.environ["MCP_TEST_SPANS"])
