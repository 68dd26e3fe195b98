"""Without OpenTelemetry nothing breaks and nothing is imported; ``TELEMETRY: False`` turns it off too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from mcp_server.checks import check_telemetry
from mcp_server.telemetry import load_telemetry
from tests.support.live import ROOT

SCRIPT = r"""
import asyncio, json, sys
sys.modules["opentelemetry"] = None  # unimportable, as when it is not installed
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
    loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry") and sys.modules[m] is not None)
    text = body["result"]["content"][0]["text"]
    otel_module = "mcp_server.telemetry.otel" in sys.modules
    telemetry = repr(runtime.requests.telemetry)
    print(json.dumps({"telemetry": telemetry, "text": text, "loaded": loaded, "otel_module": otel_module}))

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


def test_nothing_breaks_and_nothing_is_imported_without_opentelemetry() -> None:
    result = python(SCRIPT, DJANGO_SETTINGS_MODULE="tests.settings")
    assert result == {"telemetry": "None", "text": "hi", "loaded": [], "otel_module": False}


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
