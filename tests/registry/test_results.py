"""What a handler returns, as the client gets it: content blocks, structured content and output schemas
(``registry/results.py``, through real tools of an ``MCPServer``)."""

from __future__ import annotations

import base64
import dataclasses
import datetime
import decimal
import inspect
import json
import uuid
from pathlib import Path
from typing import Annotated, Any, Optional, Union

import jsonschema  # type: ignore[import-untyped]  # installed with mcp, no stubs
import mcp_types as mt
import pytest
from mcp_types.methods import serialize_server_result
from pydantic import BaseModel, Field, RootModel
from typing_extensions import TypedDict

from mcp_server import MCPServer
from mcp_server.registry.results import Audio, Image, dump, output_schema_for, to_content, to_json_text

PNG = b"\x89PNG\r\n\x1a\nfake"
WAV = b"RIFF\x00\x00\x00\x00WAVEfake"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class Point(BaseModel):
    x: int
    y: int = Field(alias="Y")


@dataclasses.dataclass
class Size:
    width: float
    height: float


class Label(TypedDict):
    text: str


class Numbers(RootModel[list[int]]):
    pass


# -- media -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("media", "block"),
    [
        (Image(PNG), {"type": "image", "data": b64(PNG), "mimeType": "image/png"}),
        (Image(PNG, mime_type="image/gif"), {"type": "image", "data": b64(PNG), "mimeType": "image/gif"}),
        (Audio(WAV), {"type": "audio", "data": b64(WAV), "mimeType": "audio/wav"}),
        (Audio(WAV, mime_type="audio/ogg"), {"type": "audio", "data": b64(WAV), "mimeType": "audio/ogg"}),
    ],
)
def test_media_from_bytes(media: Image | Audio, block: dict[str, Any]) -> None:
    assert media.to_block() == block
    assert to_content(media) == [block]


@pytest.mark.parametrize(
    ("kind", "name", "mime_type", "expected"),
    [
        (Image, "chart.png", None, "image/png"),
        (Image, "chart.png", "image/webp", "image/webp"),
        (Image, "chart.unknown-ext", None, "image/png"),
        (Audio, "clip.mp3", None, "audio/mpeg"),
        (Audio, "clip.unknown-ext", None, "audio/wav"),
    ],
)
def test_media_from_a_path_guesses_its_type(
    tmp_path: Path, kind: type[Image | Audio], name: str, mime_type: str | None, expected: str
) -> None:
    path = tmp_path / name
    path.write_bytes(PNG)
    for where in (path, str(path)):
        media = kind(path=where, mime_type=mime_type)
        assert media.data == PNG
        assert media.to_block() == {"type": kind.kind, "data": b64(PNG), "mimeType": expected}


@pytest.mark.parametrize("kind", [Image, Audio])
def test_media_takes_either_data_or_a_path(tmp_path: Path, kind: type[Image | Audio]) -> None:
    with pytest.raises(ValueError, match=f"{kind.__name__} takes either data or path"):
        kind()
    with pytest.raises(ValueError, match=f"{kind.__name__} takes either data or path"):
        kind(PNG, path=tmp_path / "x.png")


# -- content blocks ----------------------------------------------------------------------------------------

TEXT = {"type": "text", "text": "hello"}
LINK = {"type": "resource_link", "uri": "test://a", "name": "a"}
EMBEDDED = {"type": "resource", "resource": {"uri": "test://b", "mimeType": "text/plain", "text": "b"}}
IMAGE = {"type": "image", "data": b64(PNG), "mimeType": "image/png"}
AUDIO = {"type": "audio", "data": b64(WAV), "mimeType": "audio/wav"}


def json_text(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}]


@pytest.mark.parametrize(
    ("value", "content"),
    [
        pytest.param(None, [], id="none"),
        pytest.param("hello", [TEXT], id="str"),
        pytest.param("", [{"type": "text", "text": ""}], id="empty-str"),
        pytest.param(mt.TextContent(type="text", text="hello"), [TEXT], id="TextContent"),
        pytest.param(
            mt.ImageContent(type="image", data=b64(PNG), mime_type="image/png"), [IMAGE], id="ImageContent"
        ),
        pytest.param(
            mt.AudioContent(type="audio", data=b64(WAV), mime_type="audio/wav"), [AUDIO], id="AudioContent"
        ),
        pytest.param(
            mt.ResourceLink(type="resource_link", uri="test://a", name="a"), [LINK], id="ResourceLink"
        ),
        pytest.param(mt.EmbeddedResource.model_validate(EMBEDDED), [EMBEDDED], id="EmbeddedResource"),
        pytest.param(dict(TEXT), [TEXT], id="text-dict"),
        pytest.param(dict(LINK), [LINK], id="resource_link-dict"),
        pytest.param(dict(EMBEDDED), [EMBEDDED], id="resource-dict"),
        pytest.param([TEXT, Image(PNG), Audio(WAV), LINK], [TEXT, IMAGE, AUDIO, LINK], id="list-of-blocks"),
        pytest.param((Image(PNG), EMBEDDED), [IMAGE, EMBEDDED], id="tuple-of-blocks"),
        pytest.param(["A pixel:", Image(PNG)], [{"type": "text", "text": "A pixel:"}, IMAGE], id="captioned"),
        pytest.param(["a", "b"], json_text('["a", "b"]'), id="list-of-str"),
        pytest.param([], json_text("[]"), id="empty-list"),
        pytest.param([TEXT, {"type": "chart"}], json_text(json.dumps([TEXT, {"type": "chart"}])), id="mixed"),
        pytest.param({"type": "chart", "n": 1}, json_text('{"type": "chart", "n": 1}'), id="unknown-type"),
        pytest.param({"a": [1, 2.5, None, True]}, json_text('{"a": [1, 2.5, null, true]}'), id="dict"),
        pytest.param(42, json_text("42"), id="int"),
        pytest.param(False, json_text("false"), id="bool"),
        pytest.param("héllo ✓", [{"type": "text", "text": "héllo ✓"}], id="unicode-str"),
        pytest.param({"café": "✓"}, json_text('{"café": "✓"}'), id="unicode-json"),
        pytest.param(Point(x=1, Y=2), json_text('{"x": 1, "Y": 2}'), id="model-by-alias"),
        pytest.param(Size(1.5, 2), json_text('{"width": 1.5, "height": 2.0}'), id="dataclass"),
        pytest.param([Point(x=1, Y=2)], json_text('[{"x": 1, "Y": 2}]'), id="list-of-models-by-alias"),
        pytest.param(
            {"p": Point(x=1, Y=2)}, json_text('{"p": {"x": 1, "Y": 2}}'), id="dict-of-models-by-alias"
        ),
        pytest.param(
            {"when": datetime.date(2025, 1, 2), "id": uuid.UUID(int=1), "cost": decimal.Decimal("1.50")},
            json_text('{"when": "2025-01-02", "id": "00000000-0000-0000-0000-000000000001", "cost": "1.50"}'),
            id="pydantic-serialisable",
        ),
    ],
)
def test_content_of_every_return_shape(value: Any, content: list[dict[str, Any]]) -> None:
    assert to_content(value) == content


def test_dump_and_json_text() -> None:
    link = mt.ResourceLink(type="resource_link", uri="test://a", name="a")
    assert dump(link) == LINK  # by alias, None fields left out
    assert to_json_text(Point(x=1, Y=2)) == '{"x": 1, "Y": 2}'
    assert to_json_text(Size(1, 2)) == '{"width": 1.0, "height": 2.0}'
    assert to_json_text("é") == '"é"'


# -- output schemas ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "annotation",
    [
        inspect.Signature.empty,
        None,
        type(None),
        Any,
        Image,
        Audio,
        Image | None,
        Optional[Audio],  # noqa: UP045 - the typing spelling is a different object
        mt.TextContent,
        mt.EmbeddedResource,
        mt.CallToolResult,
        mt.TextContent | mt.ImageContent,
        list[Image],
        tuple[str, Image],
        list[str | Image],
        list[mt.TextContent | mt.ImageContent],
        Annotated[Image, "a chart"],
        Annotated[list[mt.ResourceLink], "links"],
    ],
)
def test_content_and_untyped_returns_have_no_output_schema(annotation: Any) -> None:
    assert output_schema_for(annotation) == (None, False)


@pytest.mark.parametrize(
    ("annotation", "schema"),
    [
        (
            Point,
            {
                "type": "object",
                "properties": {
                    "x": {"title": "X", "type": "integer"},
                    "Y": {"title": "Y", "type": "integer"},
                },
                "required": ["x", "Y"],
            },
        ),
        (
            Annotated[Point, "documented"],
            {
                "type": "object",
                "properties": {
                    "x": {"title": "X", "type": "integer"},
                    "Y": {"title": "Y", "type": "integer"},
                },
                "required": ["x", "Y"],
            },
        ),
        (
            Size,
            {
                "type": "object",
                "properties": {
                    "width": {"title": "Width", "type": "number"},
                    "height": {"title": "Height", "type": "number"},
                },
                "required": ["width", "height"],
            },
        ),
        (
            Label,
            {
                "type": "object",
                "properties": {"text": {"title": "Text", "type": "string"}},
                "required": ["text"],
            },
        ),
        (dict[str, int], {"type": "object", "additionalProperties": {"type": "integer"}}),
        (dict, {"type": "object", "additionalProperties": True}),
    ],
)
def test_object_returns_are_their_own_output_schema(annotation: Any, schema: dict[str, Any]) -> None:
    assert output_schema_for(annotation) == (schema, False)


def wrapped(result: dict[str, Any], defs: dict[str, Any] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": {"result": result}, "required": ["result"]}
    if defs:
        schema["$defs"] = defs
    return schema


POINT_DEF = {
    "Point": {
        "title": "Point",
        "type": "object",
        "properties": {"x": {"title": "X", "type": "integer"}, "Y": {"title": "Y", "type": "integer"}},
        "required": ["x", "Y"],
    }
}


@pytest.mark.parametrize(
    ("annotation", "schema"),
    [
        (str, wrapped({"type": "string"})),
        (int, wrapped({"type": "integer"})),
        (bool, wrapped({"type": "boolean"})),
        (list[int], wrapped({"type": "array", "items": {"type": "integer"}})),
        (Annotated[int, Field(ge=0)], wrapped({"type": "integer", "minimum": 0})),
        (Union[int, str], wrapped({"anyOf": [{"type": "integer"}, {"type": "string"}]})),  # noqa: UP007
        (Point | None, wrapped({"anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}]}, POINT_DEF)),
        (list[Point], wrapped({"type": "array", "items": {"$ref": "#/$defs/Point"}}, POINT_DEF)),
        (Numbers, wrapped({"title": "Numbers", "type": "array", "items": {"type": "integer"}})),
    ],
)
def test_other_returns_are_wrapped_under_result(annotation: Any, schema: dict[str, Any]) -> None:
    assert output_schema_for(annotation) == (schema, True)


# -- through a tool: what tools/call answers -----------------------------------------------------------------


def results_server() -> MCPServer:
    """Tools returning each shape (built on use, so that a registration error fails only the tests below)."""
    server = MCPServer("results-tests")

    @server.tool
    async def where() -> Point:
        return Point(x=1, Y=2)

    @server.tool
    async def count() -> int:
        return 3

    @server.tool
    async def points() -> list[Point]:
        return [Point(x=1, Y=2)]

    @server.tool
    async def named_points() -> dict[str, Point]:
        return {"origin": Point(x=0, Y=0)}

    @server.tool
    async def maybe_point(present: bool) -> Point | None:
        return Point(x=1, Y=2) if present else None

    @server.tool
    async def captioned() -> list[str | Image]:
        return ["A pixel:", Image(PNG)]

    @server.tool
    async def chart() -> Image:
        return Image(PNG)

    @server.tool
    async def ready_made() -> mt.CallToolResult:
        return mt.CallToolResult(content=[mt.TextContent(type="text", text="as is")], is_error=True)

    @server.tool(structured_output=False)
    async def plain_dict() -> dict[str, int]:
        return {"a": 1}

    @server.tool
    async def untyped():  # type: ignore[no-untyped-def]  # no annotation on purpose
        return {"a": 1}

    return server


@pytest.fixture(scope="module")
def server() -> MCPServer:
    return results_server()


@pytest.mark.parametrize(
    ("name", "arguments", "result"),
    [
        (
            "where",
            {},
            {"content": json_text('{"x": 1, "Y": 2}'), "structuredContent": {"x": 1, "Y": 2}},
        ),
        ("count", {}, {"content": json_text("3"), "structuredContent": {"result": 3}}),
        (
            "points",
            {},
            {"content": json_text('[{"x": 1, "Y": 2}]'), "structuredContent": {"result": [{"x": 1, "Y": 2}]}},
        ),
        (
            "named_points",
            {},
            {
                "content": json_text('{"origin": {"x": 0, "Y": 0}}'),
                "structuredContent": {"origin": {"x": 0, "Y": 0}},
            },
        ),
        (
            "maybe_point",
            {"present": True},
            {"content": json_text('{"x": 1, "Y": 2}'), "structuredContent": {"result": {"x": 1, "Y": 2}}},
        ),
        ("maybe_point", {"present": False}, {"content": []}),
        ("captioned", {}, {"content": [{"type": "text", "text": "A pixel:"}, IMAGE]}),
        ("chart", {}, {"content": [IMAGE]}),
        ("ready_made", {}, {"content": [{"type": "text", "text": "as is"}], "isError": True}),
        ("plain_dict", {}, {"content": json_text('{"a": 1}')}),
        ("untyped", {}, {"content": json_text('{"a": 1}')}),
    ],
)
async def test_tools_call_result_of_every_return_shape(
    server: MCPServer, name: str, arguments: dict[str, Any], result: dict[str, Any]
) -> None:
    tool = server.tools[name]
    answer = await tool.call(arguments, None)
    assert serialize_server_result("tools/call", "2025-11-25", answer) == result  # as the dispatcher sends it
    schema = tool.definition().get("outputSchema")
    assert (schema is not None) == ("structuredContent" in result or name == "maybe_point")
    if "structuredContent" in result:
        # What a client checks: the structured content matches the advertised schema.
        jsonschema.validate(answer["structuredContent"], schema)
