"""The request's fields on the log records about it (``RequestLogFilter``), printed by the JSON formatter;
client-given strings escaped."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
from opentelemetry import trace

from mcp_server.core.records import LedgerRecord, request_key
from mcp_server.runtime import Runtime
from mcp_server.telemetry import RequestJSONFormatter, RequestLogFilter, log_fields
from mcp_server.telemetry.logs import FIELDS, escaped

from .conftest import SESSION, Recorded, new_post, run


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []
        self.addFilter(RequestLogFilter())

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def collected() -> Iterator[Collect]:
    handler = Collect()
    logger = logging.getLogger("mcp_server")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


@pytest.mark.asyncio
async def test_a_request_s_log_record_carries_its_fields(
    runtime: Runtime, recorded: Recorded, collected: Collect
) -> None:
    await run(new_post(runtime), {"jsonrpc": "2.0", "id": "r-1", "method": "test/raise"})
    (record,) = [r for r in collected.records if r.getMessage().startswith("MCP request 'r-1'")]
    span = recorded.span("test/raise")
    assert {key: getattr(record, key) for key in FIELDS} == {
        "mcp_request_id": "r-1",
        "mcp_method": "test/raise",
        "mcp_tool": None,
        "mcp_session_id": SESSION,
        "mcp_client": None,
        "mcp_user_id": None,
        "mcp_worker": "worker-t",
        "trace_id": trace.format_trace_id(span.context.trace_id),
    }
    printed = json.loads(RequestJSONFormatter().format(record))
    assert printed["mcp_request_id"] == "r-1"
    assert printed["trace_id"] == getattr(record, "trace_id")  # noqa: B009 (set by the filter)
    assert printed["level"] == "ERROR"
    assert "Traceback" in printed["exception"]


def test_outside_a_request_every_field_is_none(collected: Collect) -> None:
    logging.getLogger("mcp_server.requests").warning("not about a request")
    assert {key: getattr(collected.records[-1], key) for key in FIELDS} == dict.fromkeys(FIELDS)


def test_client_given_strings_are_escaped() -> None:
    class Entry:
        span = None
        record = LedgerRecord(
            session_id="s",
            request_key=request_key("id\n[ERROR] forged"),
            method="tools/call",
            name="evil\x1b[31m",
            client="client\r\nname 1.0",
        )

    fields = log_fields(Entry())
    assert fields["mcp_request_id"] == "id\\n[ERROR] forged"
    assert fields["mcp_tool"] == "evil\\x1b[31m"
    assert fields["mcp_client"] == "client\\r\\nname 1.0"
    assert escaped("x" * 500) == "x" * 200
