"""The 2025-11-25 feature set beyond what the conformance suite checks: pagination, output schemas,
completion values, missing resources, logging levels, and elicitation, sampling and roots with the official
client (what travels both ways, and a client's error answers)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import httpx
import pytest
from django.core.exceptions import ImproperlyConfigured
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    ErrorData,
    ListRootsResult,
    LoggingMessageNotificationParams,
    PromptReference,
    ResourceTemplateReference,
)
from pydantic import BaseModel
from typing_extensions import TypedDict

from mcp_server import MCPServer
from mcp_server.core.context import LOG_LEVELS
from mcp_server.registry.results import output_schema_for
from tests.support.live import LiveServer
from tests.support.raw import RawSession, open_session
from tests.testapp.mcp import FEATURE_COLOURS, FEATURE_ELICIT_SCHEMA


@pytest.fixture(scope="module")
def paged_server(start: Callable[..., LiveServer]) -> LiveServer:
    return start({"PAGE_SIZE": 2})


@pytest.fixture
async def session(paged_server: LiveServer) -> AsyncIterator[RawSession]:
    async with httpx.AsyncClient(timeout=20) as http:
        yield await open_session(http, paged_server.url)


async def test_lists_are_paginated_with_opaque_cursors(session: RawSession) -> None:
    names: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        params = {"cursor": cursor} if cursor else {}
        result = (await session.request("tools/list", params))["result"]
        assert len(result["tools"]) <= 2
        names += [tool["name"] for tool in result["tools"]]
        pages += 1
        cursor = result.get("nextCursor")
        if not cursor:
            break
    assert pages > 2
    assert len(names) == len(set(names))
    assert {"echo", "search_books", "test_simple_text"} <= set(names)


@pytest.mark.parametrize("cursor", ["not-a-cursor", "eyJvIjogLTF9", "eyJvIjogOTk5OX0="])
async def test_a_bad_cursor_is_invalid_params(session: RawSession, cursor: str) -> None:
    answer = await session.request("tools/list", {"cursor": cursor})
    assert answer["error"]["code"] == -32602


async def test_the_official_client_follows_cursors(paged_server: LiveServer) -> None:
    async with Client(paged_server.url) as client:
        first = await client.list_tools()
        assert first.next_cursor is not None
        second = await client.list_tools(cursor=first.next_cursor)
        assert {t.name for t in first.tools}.isdisjoint({t.name for t in second.tools})


async def test_missing_resource_is_minus_32002(session: RawSession) -> None:
    answer = await session.request("resources/read", {"uri": "catalogue://nothing-here"})
    assert answer["error"]["code"] == -32002


@pytest.mark.parametrize(
    ("value", "values"),
    [
        ("", ["paris", "park", "party", "test", "testing", "tested"]),
        ("pa", ["paris", "park", "party"]),
        ("TEST", ["test", "testing", "tested"]),
        ("zz", []),
    ],
)
async def test_completion_of_prompt_arguments(session: RawSession, value: str, values: list[str]) -> None:
    params = {
        "ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
        "argument": {"name": "arg1", "value": value},
    }
    answer = await session.request("completion/complete", params)
    assert answer["result"]["completion"] == {"values": values, "total": len(values), "hasMore": False}


async def test_logging_set_level_rejects_unknown_levels(session: RawSession) -> None:
    assert (await session.request("logging/setLevel", {"level": "warning"}))["result"] == {}
    assert (await session.request("logging/setLevel", {"level": "loud"}))["error"]["code"] == -32602


async def test_unknown_prompt_is_invalid_params(paged_server: LiveServer) -> None:
    async with Client(paged_server.url) as client:
        with pytest.raises(MCPError) as raised:
            await client.get_prompt("no_such_prompt", {})
        assert raised.value.error.code == -32602


class Point(BaseModel):
    x: int
    y: int


@dataclasses.dataclass
class Size:
    width: float
    height: float


class Label(TypedDict):
    text: str


@pytest.mark.parametrize(
    ("annotation", "wrapped", "required"),
    [
        (Point, False, {"x", "y"}),
        (Size, False, {"width", "height"}),
        (Label, False, {"text"}),
        (int, True, {"result"}),
        (list[Point], True, {"result"}),
        (dict[str, int], False, set()),
    ],
)
def test_output_schemas_from_return_types(annotation: object, wrapped: bool, required: set[str]) -> None:
    schema, is_wrapped = output_schema_for(annotation)
    assert schema is not None
    assert schema["type"] == "object"
    assert is_wrapped is wrapped
    assert set(schema.get("required", [])) == required


async def test_structured_content_carries_a_text_copy() -> None:
    server = MCPServer("features")

    @server.tool
    async def where() -> Point:
        return Point(x=1, y=2)

    result = server.tools["where"].to_result(Point(x=1, y=2))
    assert result["structuredContent"] == {"x": 1, "y": 2}
    assert result["content"][0]["text"] == '{"x": 1, "y": 2}'
    assert server.tools["where"].definition()["outputSchema"]["required"] == ["x", "y"]


def test_a_server_can_include_another() -> None:
    base, extra = MCPServer("base"), MCPServer("extra")

    @extra.tool
    async def ping_tool() -> str:
        return "pong"

    @extra.resource("extra://thing")
    async def thing() -> str:
        return "thing"

    base.include(extra)
    assert base.tools["ping_tool"] is extra.tools["ping_tool"]
    assert base.find_resource("extra://thing") is not None
    with pytest.raises(ImproperlyConfigured):
        base.include(extra)


# -- completion: the exact values a handler returns, through the official client -------------------------


async def complete(
    server: LiveServer,
    ref: PromptReference | ResourceTemplateReference,
    name: str,
    value: str,
    **context: str,
) -> dict[str, Any]:
    async with Client(server.url) as client:
        result = await client.complete(ref, {"name": name, "value": value}, context or None)
    return result.completion.model_dump(by_alias=True, exclude_none=True)


async def test_completion_values_are_the_handlers_values(live_server: LiveServer) -> None:
    palette = PromptReference(type="ref/prompt", name="feature_palette")
    assert await complete(live_server, palette, "colour", "colour-14") == {
        "values": [f"colour-14{n}" for n in range(10)],
        "total": 10,
        "hasMore": False,
    }
    template = ResourceTemplateReference(type="ref/resource", uri="test://template/{id}/data")
    assert await complete(live_server, template, "id", "1") == {
        "values": ["1", "123"],
        "total": 2,
        "hasMore": False,
    }


async def test_completion_keeps_100_values_and_says_there_are_more(live_server: LiveServer) -> None:
    palette = PromptReference(type="ref/prompt", name="feature_palette")
    assert await complete(live_server, palette, "colour", "") == {
        "values": FEATURE_COLOURS[:100],
        "total": 150,
        "hasMore": True,
    }


async def test_a_completion_dict_and_the_context_arguments_reach_the_client(live_server: LiveServer) -> None:
    palette = PromptReference(type="ref/prompt", name="feature_palette")
    assert await complete(live_server, palette, "shade", "dark", colour="red") == {
        "values": ["red-darklight"],
        "total": 7,
        "hasMore": True,
    }


async def test_an_argument_without_a_completion_handler_completes_to_nothing(live_server: LiveServer) -> None:
    no_handler = PromptReference(type="ref/prompt", name="test_prompt_with_embedded_resource")
    assert await complete(live_server, no_handler, "resourceUri", "test") == {
        "values": [],
        "total": 0,
        "hasMore": False,
    }


# -- server-to-client requests and logging: what travels both ways with the official client -------------

CLIENT_ERROR = {"code": -32042, "message": "The user closed the dialog", "data": {"where": "test"}}


def client_error() -> ErrorData:
    return ErrorData.model_validate(CLIENT_ERROR)


def missing_capability(name: str) -> dict[str, Any]:
    return {"error": {"code": -32600, "message": f"The client did not declare the {name!r} capability"}}


@pytest.mark.parametrize(
    "answer",
    [
        {"action": "accept", "content": {"name": "Ada"}},
        {"action": "decline"},
        {"action": "cancel"},
    ],
)
async def test_an_elicitation_travels_both_ways(live_server: LiveServer, answer: dict[str, Any]) -> None:
    asked: list[dict[str, Any]] = []

    async def elicit(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params.model_dump(by_alias=True, exclude_unset=True))
        return ElicitResult.model_validate(answer)

    async with Client(live_server.url, mode="legacy", elicitation_callback=elicit) as client:
        result = await client.call_tool("feature_elicit", {"message": "Your name?"})
    assert asked == [{"mode": "form", "message": "Your name?", "requestedSchema": FEATURE_ELICIT_SCHEMA}]
    assert not result.is_error
    assert result.structured_content == {"answer": answer}


async def test_a_client_error_answer_to_elicitation_is_an_error_in_the_tool(
    live_server: LiveServer,
) -> None:
    asked: list[str] = []

    async def refuse(context: ClientRequestContext, params: ElicitRequestParams) -> ErrorData:
        asked.append(params.message)
        return client_error()

    async with Client(live_server.url, mode="legacy", elicitation_callback=refuse) as client:
        caught = await client.call_tool("feature_elicit", {"message": "Your name?"})
        assert caught.structured_content == {"error": CLIENT_ERROR}
        # A tool that does not catch it: the tools/call request is answered with the client's error.
        with pytest.raises(MCPError) as raised:
            await client.call_tool("test_elicitation", {"message": "Who are you?"})
    assert raised.value.error.model_dump(exclude_none=True) == CLIENT_ERROR
    assert asked == ["Your name?", "Who are you?"]


async def test_an_elicitation_callback_that_raises_is_an_error_in_the_tool(live_server: LiveServer) -> None:
    async def crash(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        raise RuntimeError("the dialog crashed")

    async with Client(live_server.url, mode="legacy", elicitation_callback=crash) as client:
        result = await client.call_tool("feature_elicit", {"message": "Your name?"})
    error = result.structured_content["error"]
    assert error["message"] == "the dialog crashed"
    assert error["code"] in {0, -32603}  # mcp 2.x answers a raising callback with code 0 (its v1 compat)


async def test_sampling_travels_both_ways(live_server: LiveServer) -> None:
    asked: list[dict[str, Any]] = []
    reply = {
        "role": "assistant",
        "content": {"type": "text", "text": "Four."},
        "model": "test-model",
        "stopReason": "endTurn",
    }

    async def sample(
        context: ClientRequestContext, params: CreateMessageRequestParams
    ) -> CreateMessageResult:
        asked.append(params.model_dump(by_alias=True, exclude_unset=True))
        return CreateMessageResult.model_validate(reply)

    async with Client(live_server.url, mode="legacy", sampling_callback=sample) as client:
        result = await client.call_tool("feature_sample", {"prompt": "What is 2+2?"})
    assert asked == [
        {
            "messages": [{"role": "user", "content": {"type": "text", "text": "What is 2+2?"}}],
            "maxTokens": 42,
            "systemPrompt": "Be brief.",
            "temperature": 0.25,
        }
    ]
    assert result.structured_content == {"answer": reply}


async def test_a_client_error_answer_to_sampling_is_an_error_in_the_tool(live_server: LiveServer) -> None:
    async def refuse(context: ClientRequestContext, params: CreateMessageRequestParams) -> ErrorData:
        return client_error()

    async with Client(live_server.url, mode="legacy", sampling_callback=refuse) as client:
        result = await client.call_tool("feature_sample", {"prompt": "What is 2+2?"})
    assert result.structured_content == {"error": CLIENT_ERROR}


async def test_roots_travel_both_ways(live_server: LiveServer) -> None:
    calls: list[int] = []
    roots = [{"uri": "file:///srv/books/", "name": "Books"}, {"uri": "file:///tmp/"}]

    async def list_roots(context: ClientRequestContext) -> ListRootsResult:
        calls.append(1)
        return ListRootsResult.model_validate({"roots": roots})

    async with Client(live_server.url, mode="legacy", list_roots_callback=list_roots) as client:
        result = await client.call_tool("feature_roots", {})
    assert calls == [1]
    assert result.structured_content == {"roots": roots}


async def test_a_client_error_answer_to_roots_is_an_error_in_the_tool(live_server: LiveServer) -> None:
    async def refuse(context: ClientRequestContext) -> ErrorData:
        return client_error()

    async with Client(live_server.url, mode="legacy", list_roots_callback=refuse) as client:
        result = await client.call_tool("feature_roots", {})
    assert result.structured_content == {"error": CLIENT_ERROR}


async def test_a_capability_the_client_did_not_declare_is_never_asked_for(live_server: LiveServer) -> None:
    # The official client answers such requests itself ("... not supported"): the message tells who refused.
    async with Client(live_server.url, mode="legacy") as client:
        for tool, capability in (
            ("feature_elicit", "elicitation"),
            ("feature_sample", "sampling"),
            ("feature_roots", "roots"),
        ):
            arguments = {"feature_elicit": {"message": "?"}, "feature_sample": {"prompt": "?"}}.get(tool, {})
            result = await client.call_tool(tool, arguments)
            assert result.structured_content == missing_capability(capability), tool


async def test_server_requests_need_a_stream_in_json_mode(start: Callable[..., LiveServer]) -> None:
    server = start({"RESPONSE_MODE": "json"})
    asked: list[str] = []

    async def elicit(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"name": "Ada"})

    async with Client(server.url, mode="legacy", elicitation_callback=elicit) as client:
        result = await client.call_tool("feature_elicit", {"message": "Your name?"})
    message = "elicitation/create needs a streamed response; RESPONSE_MODE is 'json'"
    assert result.structured_content == {"error": {"code": -32600, "message": message}}
    assert asked == []


LOGGING_DEPRECATED = "ignore::mcp.shared.exceptions.MCPDeprecationWarning"
"""mcp 2.x warns that logging is deprecated after 2025-11-25, the version these sessions speak."""


class LogRecorder:
    """The ``notifications/message`` a client receives, and an event for ``feature_log``'s end mark."""

    def __init__(self) -> None:
        self.records: list[tuple[str, str | None, Any]] = []
        self.ended = anyio.Event()

    async def __call__(self, params: LoggingMessageNotificationParams) -> None:
        self.records.append((params.level, params.logger, params.data))
        if params.logger == "features.end":
            self.ended.set()

    async def run_feature_log(self, client: Client) -> list[tuple[str, str | None, Any]]:
        """Call ``feature_log``; once its end mark has arrived, every message the session got before it."""
        assert (await client.call_tool("feature_log", {})).content[0].text == "logged"
        with anyio.fail_after(10):
            await self.ended.wait()
        # Messages arrive in order and the end mark is the last one sent: nothing earlier can still come.
        assert self.records[-1] == ("emergency", "features.end", "end")
        return self.records[:-1]


def expected_logs(threshold: str) -> list[tuple[str, str | None, Any]]:
    at_or_above = LOG_LEVELS[LOG_LEVELS.index(threshold) :]
    per_level = [(level, "features", {"level": level}) for level in at_or_above]
    shortcuts = [(level, None, f"via {level}") for level in ("debug", "info", "warning", "error")]
    return per_level + [record for record in shortcuts if record[0] in at_or_above]


@pytest.mark.filterwarnings(LOGGING_DEPRECATED)
@pytest.mark.parametrize("threshold", LOG_LEVELS)
async def test_log_messages_below_the_level_are_not_sent(live_server: LiveServer, threshold: str) -> None:
    recorder = LogRecorder()
    async with Client(live_server.url, mode="legacy", logging_callback=recorder) as client:
        await client.set_logging_level(threshold)
        assert await recorder.run_feature_log(client) == expected_logs(threshold)


@pytest.mark.filterwarnings(LOGGING_DEPRECATED)
async def test_no_log_message_is_sent_before_the_client_sets_a_level(live_server: LiveServer) -> None:
    recorder = LogRecorder()
    async with Client(live_server.url, mode="legacy", logging_callback=recorder) as client:
        quiet = await client.call_tool("feature_log", {})
        assert quiet.content[0].text == "logged"
        # Anything the first call sent came before its response, so before the second call's end mark.
        await client.set_logging_level("emergency")
        assert await recorder.run_feature_log(client) == [("emergency", "features", {"level": "emergency"})]


@pytest.mark.filterwarnings(LOGGING_DEPRECATED)
async def test_the_log_level_belongs_to_its_session(live_server: LiveServer) -> None:
    loud, quiet = LogRecorder(), LogRecorder()
    async with (
        Client(live_server.url, mode="legacy", logging_callback=loud) as verbose,
        Client(live_server.url, mode="legacy", logging_callback=quiet) as terse,
    ):
        await verbose.set_logging_level("debug")
        await terse.set_logging_level("critical")
        assert await loud.run_feature_log(verbose) == expected_logs("debug")
        assert await quiet.run_feature_log(terse) == expected_logs("critical")
