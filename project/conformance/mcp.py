"""Fixtures of the official MCP conformance suite (``@modelcontextprotocol/conformance``).

The suite's server scenarios call tools, resources and prompts by fixed names and check what they
return; each handler below answers the way its scenario describes (``src/scenarios/server/`` in the
suite's source). They are registered on the default server, beside the catalogue.
"""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

from pydantic import Field

from mcp_server import Audio, Context, Image, McpHeader, MCPServer, MissingClientCapability, ToolError
from mcp_server.registry.server import server_of
from mcp_server.updates import anotify_list_changed, anotify_resource_updated
from project.mcp_servers import conformance

from . import rounds  # noqa: F401  (the MRTR fixtures of 2026-07-28)
from .assets import png_pixel, wav_silence

__all__ = ["JSON_SCHEMA_2020_12", "STEP_DELAY", "WATCHED_URI", "notify_watched_resource_changed"]

STEP_DELAY = 0.05
"""Seconds between the log messages and the progress steps of the timed tools."""

WATCHED_URI = "test://watched-resource"

_watched_text = "Watched resource content"


def _png() -> Image:
    return Image(png_pixel(), mime_type="image/png")


# -- tools ------------------------------------------------------------------------------------------


@conformance.tool(structured_output=False)
async def test_simple_text() -> str:
    """Returns one text block (tools-call-simple-text)."""
    return "This is a simple text response for testing."


@conformance.tool(structured_output=False)
async def test_image_content() -> Image:
    """Returns a 1x1 PNG image block (tools-call-image)."""
    return _png()


@conformance.tool(structured_output=False)
async def test_audio_content() -> Audio:
    """Returns a short WAV audio block (tools-call-audio)."""
    return Audio(wav_silence(), mime_type="audio/wav")


@conformance.tool(structured_output=False)
async def test_embedded_resource() -> dict[str, Any]:
    """Returns an embedded text resource (tools-call-embedded-resource)."""
    return {
        "type": "resource",
        "resource": {
            "uri": "test://embedded-resource",
            "mimeType": "text/plain",
            "text": "This is an embedded resource content.",
        },
    }


@conformance.tool(structured_output=False)
async def test_multiple_content_types() -> list[Any]:
    """Returns text, an image and an embedded JSON resource (tools-call-mixed-content)."""
    return [
        {"type": "text", "text": "Multiple content types test:"},
        _png(),
        {
            "type": "resource",
            "resource": {
                "uri": "test://mixed-content-resource",
                "mimeType": "application/json",
                "text": json.dumps({"test": "data", "value": 123}, separators=(",", ":")),
            },
        },
    ]


@conformance.tool(structured_output=False)
async def test_tool_with_logging(ctx: Context) -> str:
    """Sends three info log messages while it runs (tools-call-with-logging)."""
    await ctx.info("Tool execution started")
    await asyncio.sleep(STEP_DELAY)
    await ctx.info("Tool processing data")
    await asyncio.sleep(STEP_DELAY)
    await ctx.info("Tool execution completed")
    return "Tool with logging executed successfully"


@conformance.tool(structured_output=False)
async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0, 50 and 100 of 100 (tools-call-with-progress)."""
    for step, value in enumerate((0, 50, 100)):
        if step:
            await asyncio.sleep(STEP_DELAY)
        await ctx.report_progress(value, 100, f"Completed step {step + 1} of 3")
    return f"Progress reported for token {ctx.progress_token}"


@conformance.tool(structured_output=False)
async def test_reconnection(ctx: Context) -> str:
    """Closes its response stream before it answers, so that the client resumes with ``Last-Event-ID``
    (server-sse-polling, SEP-1699); the result reaches the client on the resumed stream."""
    closed = await ctx.close_stream()
    return "Reconnection test completed" if closed else "Reconnection test completed (no stream to close)"


@conformance.tool(structured_output=False)
async def test_error_handling() -> str:
    """Always fails: an ``isError`` result (tools-call-error)."""
    raise ToolError("This tool intentionally returns an error for testing")


def _sampled_text(result: dict[str, Any]) -> str:
    content = result.get("content")
    blocks = content if isinstance(content, list) else [content]
    texts = [b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
    return " ".join(texts) or json.dumps(content)


@conformance.tool(structured_output=False)
async def test_sampling(
    prompt: Annotated[str, Field(description="The prompt to send to the LLM")], ctx: Context
) -> str:
    """Asks the client's model to answer the prompt (tools-call-sampling)."""
    result = await ctx.sample(prompt, max_tokens=100)
    return f"LLM response: {_sampled_text(result)}"


def _elicited(prefix: str, result: dict[str, Any]) -> str:
    content = json.dumps(result.get("content") or {}, separators=(",", ":"))
    return f"{prefix}: action={result.get('action')}, content={content}"


@conformance.tool(structured_output=False)
async def test_elicitation(
    message: Annotated[str, Field(description="The message to show the user")], ctx: Context
) -> str:
    """Asks the user for a username and an email (tools-call-elicitation)."""
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    return _elicited("User response", await ctx.elicit(message, schema))


@conformance.tool(structured_output=False)
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Elicits fields of every primitive type, each with a default (elicitation-sep1034-defaults)."""
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {
                "type": "string",
                "description": "User status",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {"type": "boolean", "description": "Verification status", "default": True},
        },
        "required": [],
    }
    result = await ctx.elicit("Please review and update the form fields with defaults", schema)
    return _elicited("Elicitation completed", result)


def _titled(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"const": value, "title": title} for value, title in pairs]


@conformance.tool(structured_output=False)
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Elicits the five enum shapes of SEP-1330 (elicitation-sep1330-enums)."""
    options = ["option1", "option2", "option3"]
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "description": "Pick one option", "enum": options},
            "titledSingle": {
                "type": "string",
                "description": "Pick one titled option",
                "oneOf": _titled(
                    ("value1", "First Option"), ("value2", "Second Option"), ("value3", "Third Option")
                ),
            },
            "legacyEnum": {
                "type": "string",
                "description": "Pick one (legacy enumNames)",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {
                "type": "array",
                "description": "Pick several options",
                "items": {"type": "string", "enum": options},
            },
            "titledMulti": {
                "type": "array",
                "description": "Pick several titled options",
                "items": {
                    "anyOf": _titled(
                        ("value1", "First Choice"), ("value2", "Second Choice"), ("value3", "Third Choice")
                    )
                },
            },
        },
        "required": [],
    }
    result = await ctx.elicit("Please select options from the enum fields", schema)
    return _elicited("Elicitation completed", result)


JSON_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}
"""An input schema using JSON Schema 2020-12 keywords that must survive ``tools/list`` unchanged."""


@conformance.tool(structured_output=False, input_schema=JSON_SCHEMA_2020_12)
async def json_schema_2020_12_tool(
    name: str | None = None,
    address: dict[str, str] | None = None,
    contactMethod: str | None = None,
    phone: str | None = None,
    email: str | None = None,
) -> str:
    """Tool with JSON Schema 2020-12 features (json-schema-2020-12, a pending scenario)."""
    given = {"name": name, "address": address, "contactMethod": contactMethod, "phone": phone, "email": email}
    arguments = {k: v for k, v in given.items() if v is not None}
    return f"JSON Schema 2020-12 tool called with: {json.dumps(arguments, separators=(',', ':'))}"


# -- 2026-07-28 (stateless core, headers) -------------------------------------------------------------


@conformance.tool(structured_output=False)
async def test_missing_capability(ctx: Context) -> str:
    """Needs the sampling capability: -32021 when this request does not declare it (server-stateless)."""
    if "sampling" not in ctx.session.client_capabilities:
        raise MissingClientCapability({"sampling": {}})
    return "The client declared sampling"


@conformance.tool(structured_output=False)
async def test_streaming_elicitation(ctx: Context) -> str:
    """Answers at once on the request's own stream, with no request of its own (server-stateless)."""
    return "Streaming elicitation: answered on the request's own stream"


@conformance.tool(structured_output=False)
async def test_logging_tool(ctx: Context) -> str:
    """Logs at info: sent only when the request's _meta asks for a log level (server-stateless)."""
    await ctx.info("Logging tool ran")
    return "Logging tool executed"


@conformance.tool(structured_output=False)
async def test_trigger_tool_change(ctx: Context) -> str:
    """Sends notifications/tools/list_changed (server-stateless, to subscriptions/listen streams)."""
    await anotify_list_changed("tools", server_of(ctx))
    return "tools/list_changed sent"


@conformance.tool(structured_output=False)
async def test_trigger_prompt_change(ctx: Context) -> str:
    """Sends notifications/prompts/list_changed (server-stateless, to subscriptions/listen streams)."""
    await anotify_list_changed("prompts", server_of(ctx))
    return "prompts/list_changed sent"


@conformance.tool(structured_output=False)
async def test_x_mcp_header(region: Annotated[str, McpHeader("Region")] = "<none>") -> str:  # noqa: PT028
    """Its region argument is mirrored in Mcp-Param-Region (http-custom-header-server-validation)."""
    return f"region={region}"


# -- resources --------------------------------------------------------------------------------------


@conformance.resource("test://static-text", name="Static Text Resource", mime_type="text/plain")
async def static_text() -> str:
    """A static text resource (resources-read-text)."""
    return "This is the content of the static text resource."


@conformance.resource("test://static-binary", name="Static Binary Resource", mime_type="image/png")
async def static_binary() -> bytes:
    """A static binary resource: a 1x1 PNG (resources-read-binary)."""
    return png_pixel()


@conformance.resource("test://template/{id}/data", name="Resource Template", mime_type="application/json")
async def template_data(id: str) -> dict[str, Any]:
    """A resource template whose content repeats its ``id`` (resources-templates-read)."""
    return {"id": id, "templateTest": True, "data": f"Data for ID: {id}"}


@conformance.resource(WATCHED_URI, name="Watched Resource", mime_type="text/plain")
async def watched_resource() -> str:
    """A resource clients subscribe to (resources-subscribe, resources-unsubscribe)."""
    return _watched_text


async def notify_watched_resource_changed(text: str, server: MCPServer = conformance) -> int:
    """Change the watched resource and tell its subscribers; returns how many sessions were told."""
    global _watched_text
    _watched_text = text
    return await anotify_resource_updated(WATCHED_URI, server)


@conformance.tool(structured_output=False)
async def update_watched_resource(text: str, ctx: Context) -> str:
    """Changes test://watched-resource and sends notifications/resources/updated to its subscribers.

    Not called by the suite: it lets a client (or a test) see subscriptions at work.
    """
    told = await notify_watched_resource_changed(text, server_of(ctx))
    return f"Updated {WATCHED_URI}; notified {told} subscribed session(s)"


# -- prompts ----------------------------------------------------------------------------------------


@conformance.prompt
async def test_simple_prompt() -> str:
    """A simple prompt without arguments (prompts-get-simple)."""
    return "This is a simple prompt for testing."


@conformance.prompt
async def test_prompt_with_arguments(
    arg1: Annotated[str, Field(description="First test argument")],
    arg2: Annotated[str, Field(description="Second test argument")],
) -> str:
    """A prompt with two required arguments (prompts-get-with-args)."""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@conformance.prompt
async def test_prompt_with_embedded_resource(
    resourceUri: Annotated[str, Field(description="URI of the resource to embed")],
) -> list[dict[str, Any]]:
    """A prompt embedding a text resource (prompts-get-embedded-resource)."""
    resource = {
        "uri": resourceUri,
        "mimeType": "text/plain",
        "text": "Embedded resource content for testing.",
    }
    return [
        {"role": "user", "content": {"type": "resource", "resource": resource}},
        {"role": "user", "content": {"type": "text", "text": "Please process the embedded resource above."}},
    ]


@conformance.prompt
async def test_prompt_with_image() -> list[Any]:
    """A prompt carrying an image (prompts-get-with-image)."""
    return [_png(), "Please analyze the image above."]


# -- completions ------------------------------------------------------------------------------------

_ARG_SUGGESTIONS = ["paris", "park", "party", "test", "testing", "tested"]


@conformance.completion(prompt="test_prompt_with_arguments")
async def complete_prompt_arguments(argument: str, value: str, context: dict[str, str]) -> list[str]:
    """Suggestions for ``test_prompt_with_arguments`` arguments that start with what was typed."""
    return [s for s in _ARG_SUGGESTIONS if s.startswith(value.lower())]


@conformance.completion(resource="test://template/{id}/data")
async def complete_template_id(argument: str, value: str, context: dict[str, str]) -> list[str]:
    """Suggestions for the ``id`` of the resource template."""
    return [i for i in ("1", "2", "3", "123") if i.startswith(value)]


from . import tasks  # noqa: E402, F401  (the tasks fixtures, listed after the others)
