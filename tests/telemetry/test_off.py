"""Without OpenTelemetry (or without prometheus_client, or both) nothing breaks and nothing of it is imported;
``TELEMETRY: False`` turns it off too."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcp_server.checks import check_telemetry
from mcp_server.telemetry import load_telemetry
from tests.support.live import ROOT, migrated_template

SCRIPT = r"""
import asyncio, json, sys
for name in HIDDEN:
    sys.modules[name] = None  # unimportable, as when it is not installed
import django
django.setup()
from django.core.cache import caches
from mcp_server.core.context import SessionState
from mcp_server.stores.ledger.cache import CacheLedger
from mcp_server.registry.server import mcp
from mcp_server.runtime import Runtime
from mcp_server.transports.exchange import PostExchange
from mcp_server.wire.jsonrpc import parse_message
import tests.testapp.mcp  # the test tools

async def main():
    runtime = Runtime(worker_id="w", ledger=CacheLedger({"RETENTION": 60}), flush_interval=0.01)
    await runtime.start()
    sent = []
    async def send(message):
        sent.append(message)
    state = SessionState(id="s", protocol_version="2025-11-25")
    post = PostExchange(runtime=runtime, server=mcp, session=state, mode="json", send=send, is_batch=False)
    params = {"name": "echo", "arguments": {"text": "hi"}}
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    await post.run([parse_message(call)])
    await runtime.aclose()
    body = json.loads(sent[1]["body"])
    from django.test import Client
    scrape = await asyncio.to_thread(Client().get, "/metrics", HTTP_HOST="localhost")  # loopback: open
    loaded = sorted(
        m for m in sys.modules
        if m.split(".")[0] in ("opentelemetry", "prometheus_client") and sys.modules[m] is not None
    )
    ours = ("mcp_server.telemetry.otel", "mcp_server.telemetry.prometheus", "mcp_server.metrics.exposition")
    print(json.dumps({
        "telemetry": type(runtime.requests.telemetry).__name__,
        "text": body["result"]["content"][0]["text"],
        "loaded": sorted({m.split(".")[0] for m in loaded}),
        "modules": [m for m in ours if m in sys.modules],
        "scrape": scrape.status_code,
    }))

asyncio.run(main())
"""


def python(script: str, **env: str) -> Any:
    """Run ``script`` in a fresh interpreter at the repository's root; its last line of output, as JSON."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    environment.pop("OTEL_PYTHON_TRACER_PROVIDER", None)
    command = [sys.executable, "-c", script]
    out = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("hidden", "expected"),
    [
        (
            ["opentelemetry", "prometheus_client"],
            {"telemetry": "NoneType", "loaded": [], "modules": [], "scrape": 404},
        ),
        (
            ["opentelemetry"],
            {
                "telemetry": "PrometheusTelemetry",
                "loaded": ["prometheus_client"],
                "modules": ["mcp_server.telemetry.prometheus", "mcp_server.metrics.exposition"],
                "scrape": 200,
            },
        ),
        (
            ["prometheus_client"],
            {
                "telemetry": "OTelTelemetry",
                "loaded": ["opentelemetry"],
                "modules": ["mcp_server.telemetry.otel"],
                "scrape": 404,  # /metrics answers "off", and imports nothing to say so
            },
        ),
    ],
    ids=["neither", "no-opentelemetry", "no-prometheus-client"],
)
def test_nothing_breaks_and_nothing_is_imported_without_them(
    hidden: list[str], expected: dict[str, Any], tmp_path: Path
) -> None:
    database = tmp_path / "db.sqlite3"  # the scrape reads the ledger's figures
    shutil.copy(migrated_template(tmp_path), database)
    script = SCRIPT.replace("HIDDEN", repr(hidden))
    result = python(script, DJANGO_SETTINGS_MODULE="tests.settings", DATABASE_URL=f"sqlite:///{database}")
    assert result == {**expected, "text": "hi"}


def test_the_setting_turns_it_off(settings: Any) -> None:
    settings.MCP_SERVER = {**settings.MCP_SERVER, "TELEMETRY": False}
    assert load_telemetry() is None
    settings.MCP_SERVER = {**settings.MCP_SERVER, "TELEMETRY": True}
    assert load_telemetry() is not None  # the API is installed here (the test extra)


def test_a_telemetry_setting_that_is_not_a_boolean_is_refused(settings: Any) -> None:
    settings.MCP_SERVER = {**settings.MCP_SERVER, "TELEMETRY": "yes"}
    assert [m.id for m in check_telemetry()] == ["mcp_server.E050"]
    settings.MCP_SERVER = {**settings.MCP_SERVER, "TELEMETRY": False}
    assert check_telemetry() == []


API_ONLY = r"""
import json
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from mcp_server.core.records import LedgerRecord
from mcp_server.telemetry.otel import OTelTelemetry

telemetry = OTelTelemetry()  # the global providers, none set up yet: the API alone
record = LedgerRecord(session_id=None, request_key="i:1", method="ping")
before = telemetry.start(record, 1, None, "http", None)
trace.set_tracer_provider(TracerProvider())  # the site sets the SDK up
after = telemetry.start(record, 1, None, "http", None)
print(json.dumps({"before": before is None, "after": after is not None and after.span.is_recording()}))
"""


def test_the_api_alone_makes_no_span_until_a_provider_is_set() -> None:
    assert python(API_ONLY) == {"before": True, "after": True}
