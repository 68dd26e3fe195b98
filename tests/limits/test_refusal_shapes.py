"""What a refused request gets (``RATE_LIMIT_REFUSAL``, ``RATE_LIMIT_HTTP_429``), and how it is seen: its own
outcome ``rate_limited`` in the span, the OpenTelemetry and Prometheus metrics. Real requests through the
exchange and the request table (the harness of ``tests/telemetry``), counted on the local-memory cache."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.cache import caches
from django.test import RequestFactory
from opentelemetry.trace import StatusCode
from prometheus_client import CollectorRegistry

from mcp_server.protocol.limit_refusal import RATE_LIMIT_KEY
from mcp_server.runtime import Runtime
from mcp_server.telemetry.prometheus import Instruments, PrometheusTelemetry
from tests.telemetry.conftest import Post, Recorded, call, new_post, recorded, run, runtime

__all__ = ["recorded", "runtime"]  # the fixtures this module borrows from tests.telemetry

pytestmark = pytest.mark.asyncio

ECHO = {"per": "address", "target": "tool:echo", "rate": "1/minute", "name": "echo"}
NONE = {"per": "address", "target": "tool:returns_none", "rate": "1/minute", "name": "none"}
LISTS = {"per": "address", "target": "method:tools/list", "rate": "1/minute", "name": "lists"}


@pytest.fixture
def limited(settings: Any) -> Any:
    caches["default"].clear()
    settings.MCP_SERVER = {**settings.MCP_SERVER, "RATE_LIMITS": [ECHO, NONE, LISTS]}
    return settings


def address() -> Any:
    return RequestFactory().post("/mcp", REMOTE_ADDR="10.9.8.7")


async def twice(runtime: Runtime, message: dict[str, Any], **post: Any) -> Post:
    """The message once (let through), then again (refused): the second POST."""
    await run(new_post(runtime, request=address(), **post), message)
    return await run(new_post(runtime, request=address(), **post), {**message, "id": 99})


def body(post: Post) -> Any:
    return json.loads(b"".join(m.get("body", b"") for m in post.sent if m["type"] == "http.response.body"))


def start(post: Post) -> tuple[int, dict[str, str]]:
    (message,) = [m for m in post.sent if m["type"] == "http.response.start"]
    return message["status"], {k.decode(): v.decode() for k, v in message["headers"]}


async def test_the_default_is_the_error_and_its_span_says_rate_limited(
    runtime: Runtime, recorded: Recorded, limited: Any
) -> None:
    post = await twice(runtime, call(1, "echo", text="hi"))
    answer = body(post)
    assert answer["error"]["code"] == -31429
    assert answer["error"]["data"]["limit"]["name"] == "echo"
    assert start(post)[0] == 200  # RATE_LIMIT_HTTP_429 is off by default
    first, refused = recorded.spans("tools/call echo")
    assert "error.type" not in dict(first.attributes or {})
    attributes = dict(refused.attributes or {})
    assert attributes["error.type"] == "rate_limited"
    assert attributes["rpc.response.status_code"] == "-31429"
    assert refused.status.status_code is StatusCode.ERROR
    points = recorded.metric("mcp_server.settlements").data.data_points
    outcomes = {p.attributes["mcp_server.outcome"]: p.value for p in points}
    assert outcomes == {"answered": 1, "rate_limited": 1}


async def test_a_tool_result_tells_the_model_when_to_retry(
    runtime: Runtime, recorded: Recorded, limited: Any
) -> None:
    limited.MCP_SERVER = {**limited.MCP_SERVER, "RATE_LIMIT_REFUSAL": "tool_result"}
    answer = body(await twice(runtime, call(1, "returns_none")))
    result = answer["result"]
    assert result["isError"] is True
    data = result["structuredContent"]  # the tool declares no outputSchema
    assert result["_meta"][RATE_LIMIT_KEY] == data
    wait = data["retryAfter"]
    assert 55 <= wait <= 60
    assert data["limit"]["name"] == "none"
    (text,) = [c["text"] for c in result["content"]]
    assert text == (
        f"Rate limit 'none' exceeded; retry after {wait} seconds. The tool 'returns_none' was not run:"
        f" wait {wait} seconds before calling it again (retrying sooner is refused too, and counts)."
    )
    refused = recorded.spans("tools/call returns_none")[1]
    assert dict(refused.attributes or {})["error.type"] == "rate_limited"  # a result, yet rate limited
    assert "rpc.response.status_code" not in dict(refused.attributes or {})


async def test_a_tool_with_an_output_schema_gets_the_data_in_meta_only(
    runtime: Runtime, limited: Any
) -> None:
    limited.MCP_SERVER = {**limited.MCP_SERVER, "RATE_LIMIT_REFUSAL": "tool_result"}
    result = body(await twice(runtime, call(1, "echo", text="hi")))["result"]
    assert result["isError"] is True
    assert "structuredContent" not in result  # it would have to match the tool's schema
    assert result["_meta"][RATE_LIMIT_KEY]["limit"]["name"] == "echo"


async def test_other_methods_are_refused_with_the_error_whatever_the_shape(
    runtime: Runtime, recorded: Recorded, limited: Any
) -> None:
    limited.MCP_SERVER = {**limited.MCP_SERVER, "RATE_LIMIT_REFUSAL": "tool_result"}
    answer = body(await twice(runtime, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
    assert answer["error"]["code"] == -31429
    assert answer["error"]["data"]["limit"]["name"] == "lists"


async def test_http_429_with_retry_after_for_one_request_answered_as_json(
    runtime: Runtime, limited: Any
) -> None:
    limited.MCP_SERVER = {**limited.MCP_SERVER, "RATE_LIMIT_HTTP_429": True}
    post = await twice(runtime, call(1, "echo", text="hi"))
    status, headers = start(post)
    answer = body(post)
    assert status == 429
    assert headers["retry-after"] == str(answer["error"]["data"]["retryAfter"])
    assert headers["content-type"].startswith("application/json")


async def test_no_429_in_a_batch_a_stream_or_for_a_tool_result(runtime: Runtime, limited: Any) -> None:
    limited.MCP_SERVER = {**limited.MCP_SERVER, "RATE_LIMIT_HTTP_429": True}
    await run(new_post(runtime, request=address()), call(1, "echo", text="hi"))
    batch = await run(
        new_post(runtime, request=address(), batch=True), call(2, "echo", text="a"), call(3, "echo", text="b")
    )
    assert start(batch)[0] == 200
    assert [a["error"]["code"] for a in body(batch)] == [-31429, -31429]
    stream = await run(new_post(runtime, request=address(), mode="sse"), call(4, "echo", text="c"))
    status, headers = start(stream)
    assert (status, headers["content-type"]) == (200, "text/event-stream")
    limited.MCP_SERVER = {**limited.MCP_SERVER, "RATE_LIMIT_REFUSAL": "tool_result"}
    result = await run(new_post(runtime, request=address()), call(5, "echo", text="d"))
    assert start(result)[0] == 200
    assert body(result)["result"]["isError"] is True


async def test_prometheus_counts_refusals_as_their_own_outcome(runtime: Runtime, limited: Any) -> None:
    registry = CollectorRegistry()
    runtime.requests.telemetry = PrometheusTelemetry(None, Instruments(registry))
    await twice(runtime, call(1, "echo", text="hi"))
    labels = {"mcp_method_name": "tools/call", "gen_ai_tool_name": "echo"}

    def count(outcome: str) -> float:
        sample = {**labels, "mcp_server_outcome": outcome}
        return registry.get_sample_value("mcp_server_settlements_total", sample) or 0.0

    assert (count("answered"), count("rate_limited"), count("error")) == (1.0, 1.0, 0.0)
