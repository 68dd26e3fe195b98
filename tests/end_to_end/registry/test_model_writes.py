"""``expose_model(..., writes=True)`` against a live server, through the official client, as two users.

``tests/authapp/mcp.py`` exposes the catalogue's books as ``shelf_*`` (lookup by ISBN); ``carol`` may view,
add and change books but not delete them, ``bob`` may only view them, ``carol_reads`` is carol with a token
limited to the read tools. A ``post_save`` receiver fails any save of a book titled "Rollback me".

It also exposes ``own_shelf_*`` (create and update, lookup by id, for any signed-in user): a user's own books,
those whose ISBN starts with ``<username>-`` (``queryset=``), whose author may only be one of the user's own
authors, named ``<Username> ...`` (``related_querysets=``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from mcp import MCPError

from tests.support.auth import make_fixtures, sdk_client, shell
from tests.support.live import LiveServer

Fixtures = tuple[LiveServer, dict[str, Any]]


@pytest.fixture(scope="module")
def site(start: Callable[..., LiveServer]) -> Fixtures:
    server = start()
    return server, make_fixtures(server)


async def author_id(client: Any) -> int:
    """The key of an author of the seeded catalogue, read through the tools."""
    page = await client.call_tool("shelf_list", {})
    assert not page.is_error, page
    return int(page.structured_content["items"][0]["author"])


async def test_create_update_and_the_schemas(site: Fixtures) -> None:
    server, data = site
    async with sdk_client(server.url, data["tokens"]["carol"]) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert {"shelf_list", "shelf_get", "shelf_create", "shelf_update"} <= set(tools)
        assert "shelf_delete" not in tools  # carol lacks catalogue.delete_book
        create = tools["shelf_create"]
        schema = create.input_schema
        # only the fields on the model itself: no id (automatic), no author__name (through a relation)
        assert set(schema["properties"]) == {"title", "author", "year", "isbn"}
        assert set(schema["required"]) == {"title", "author", "year", "isbn"}
        assert schema["properties"]["year"]["type"] == "integer"
        assert create.annotations is not None
        assert create.annotations.read_only_hint is False
        assert create.annotations.destructive_hint is False
        update = tools["shelf_update"]
        assert update.input_schema["required"] == ["isbn"]
        assert update.annotations is not None
        assert update.annotations.idempotent_hint is True
        assert update.annotations.read_only_hint is False

        author = await author_id(client)
        made = await client.call_tool(
            "shelf_create", {"title": "A Written Book", "author": author, "year": 2001, "isbn": "W-1"}
        )
        assert not made.is_error, made
        assert made.structured_content["isbn"] == "W-1"
        assert made.structured_content["title"] == "A Written Book"
        assert isinstance(made.structured_content["id"], int)
        assert made.structured_content["author__name"]

        changed = await client.call_tool("shelf_update", {"isbn": "W-1", "year": 2002})
        assert not changed.is_error, changed
        assert changed.structured_content["year"] == 2002
        assert changed.structured_content["title"] == "A Written Book"  # untouched
        got = await client.call_tool("shelf_get", {"isbn": "W-1"})
        assert got.structured_content["year"] == 2002

        missing = await client.call_tool("shelf_update", {"isbn": "W-404", "year": 1})
        assert missing.is_error
        assert missing.content[0].text == "No book with isbn 'W-404'"


async def test_validation_errors_name_each_failing_field(site: Fixtures) -> None:
    server, data = site
    async with sdk_client(server.url, data["tokens"]["carol"]) as client:
        author = await author_id(client)
        first = await client.call_tool(
            "shelf_create", {"title": "Unique", "author": author, "year": 1990, "isbn": "W-2"}
        )
        assert not first.is_error, first
        bad = await client.call_tool(
            "shelf_create", {"title": "", "author": 999999, "year": 1990, "isbn": "W-2"}
        )
        assert bad.is_error
        text = bad.content[0].text
        assert text.startswith("Invalid book: ")
        assert "title: This field cannot be blank." in text
        assert "author: author instance with id 999999 is not a valid choice." in text
        assert "isbn: Book with this Isbn already exists." in text
        assert "year" not in text
        too_long = await client.call_tool("shelf_update", {"isbn": "W-2", "title": "x" * 301})
        assert too_long.is_error
        assert "title: Ensure this value has at most 300 characters (it has 301)." in too_long.content[0].text
        # null is passed on, not taken for "left out": it would clear a nullable field; year is not one
        nulled = await client.call_tool("shelf_update", {"isbn": "W-2", "year": None})
        assert nulled.is_error
        assert nulled.content[0].text == "Invalid book: year: This field cannot be null."
        got = await client.call_tool("shelf_get", {"isbn": "W-2"})
        assert got.structured_content["title"] == "Unique"  # nothing written
        assert got.structured_content["year"] == 1990


async def test_a_failing_save_leaves_nothing(site: Fixtures) -> None:
    server, data = site
    async with sdk_client(server.url, data["tokens"]["carol"]) as client:
        author = await author_id(client)
        failed = await client.call_tool(
            "shelf_create", {"title": "Rollback me", "author": author, "year": 1990, "isbn": "W-3"}
        )
        assert failed.is_error
        absent = await client.call_tool("shelf_get", {"isbn": "W-3"})
        assert absent.is_error  # the row the save wrote was rolled back
        assert absent.content[0].text == "No book with isbn 'W-3'"
        kept = await client.call_tool(
            "shelf_create", {"title": "Kept", "author": author, "year": 1990, "isbn": "W-4"}
        )
        assert not kept.is_error, kept
        renamed = await client.call_tool("shelf_update", {"isbn": "W-4", "title": "Rollback me"})
        assert renamed.is_error
        got = await client.call_tool("shelf_get", {"isbn": "W-4"})
        assert got.structured_content["title"] == "Kept"


async def test_permissions_and_scopes_refuse_writes(site: Fixtures) -> None:
    server, data = site
    async with sdk_client(server.url, data["tokens"]["bob"]) as client:  # may only view books
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"shelf_list", "shelf_get"} <= names
        assert not names & {"shelf_create", "shelf_update", "shelf_delete"}
        with pytest.raises(MCPError, match="Unknown tool"):
            await client.call_tool("shelf_create", {"title": "t", "author": 1, "year": 1, "isbn": "W-5"})
    async with sdk_client(server.url, data["tokens"]["carol_reads"]) as client:  # carol, read scopes only
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names == {"shelf_list", "shelf_get"}  # an mcp_ token cannot step up: not listed
        with pytest.raises(MCPError, match=r"Insufficient scope: .* authorize tool:shelf_update"):  # HTTP 403
            await client.call_tool("shelf_update", {"isbn": "W-1", "year": 1})
    async with sdk_client(server.url, data["tokens"]["carol"]) as client:
        with pytest.raises(MCPError, match="Unknown tool"):  # no catalogue.delete_book
            await client.call_tool("shelf_delete", {"isbn": "W-1"})


@pytest.fixture(scope="module")
def writers(site: Fixtures) -> dict[str, int]:
    """The authors "Carol Writer" (carol's own) and "Bob Writer" (bob's own), by name: their keys."""
    server, _data = site
    made = shell(
        server,
        "import json; from project.catalogue.models import Author; names = ('Carol Writer', 'Bob Writer'); "
        "print(json.dumps({n: Author.objects.get_or_create(name=n)[0].pk for n in names}))",
    )
    return dict(json.loads(made.strip().splitlines()[-1]))


def invalid_author(key: int) -> str:
    return f"Invalid book: author: author instance with id {key} is not a valid choice."


OUTSIDE = "Refused: the book would fall outside the rows this tool reaches (nothing was written)"


async def test_a_write_cannot_move_a_row_out_of_the_callers_rows(
    site: Fixtures, writers: dict[str, int]
) -> None:
    server, data = site
    mine = {"title": "Carol's Own", "author": writers["Carol Writer"], "year": 2001}
    async with sdk_client(server.url, data["tokens"]["carol"]) as carol:
        made = await carol.call_tool("own_shelf_create", {**mine, "isbn": "carol-1"})
        assert not made.is_error, made
        assert made.structured_content["author__name"] == "Carol Writer"
        key = made.structured_content["id"]
        # a new row outside her rows (bob's prefix) is refused, and its fields are not shown
        given = await carol.call_tool("own_shelf_create", {**mine, "isbn": "bob-9"})
        assert given.is_error
        assert given.content[0].text == OUTSIDE
        assert given.structured_content is None
        # an update that would take her row out of her rows (into bob's) is refused and rolled back
        moved = await carol.call_tool("own_shelf_update", {"id": key, "isbn": "bob-1", "title": "Moved"})
        assert moved.is_error
        assert moved.content[0].text == OUTSIDE
        kept = await carol.call_tool("own_shelf_get", {"id": key})
        assert kept.structured_content["isbn"] == "carol-1"
        assert kept.structured_content["title"] == "Carol's Own"
        unchanged = await carol.call_tool("own_shelf_update", {"id": key, "year": 2003})
        assert not unchanged.is_error, unchanged  # a change inside her rows goes through
        assert unchanged.structured_content["year"] == 2003
    async with sdk_client(server.url, data["tokens"]["bob"]) as bob:
        assert (await bob.call_tool("own_shelf_list", {})).structured_content["items"] == []
        for name in ("own_shelf_get", "own_shelf_update"):
            hidden = await bob.call_tool(name, {"id": key})
            assert hidden.is_error
            assert hidden.content[0].text == f"No book with id {key}"
        gone = await bob.call_tool("shelf_get", {"isbn": "bob-9"})
        assert gone.is_error  # carol's refused create was rolled back
        assert (await bob.call_tool("shelf_get", {"isbn": "bob-1"})).is_error


async def test_a_foreign_key_may_only_name_the_callers_rows(site: Fixtures, writers: dict[str, int]) -> None:
    server, data = site
    carols, bobs = writers["Carol Writer"], writers["Bob Writer"]
    async with sdk_client(server.url, data["tokens"]["bob"]) as bob:
        book = {"title": "Bob's Own", "year": 1999, "isbn": "bob-2"}
        theirs = await bob.call_tool("own_shelf_create", {**book, "author": carols})
        assert theirs.is_error
        # the same refusal as for an author that does not exist: it tells nothing of carol's authors
        assert theirs.content[0].text == invalid_author(carols)
        absent = await bob.call_tool("own_shelf_create", {**book, "author": 999999})
        assert absent.content[0].text == invalid_author(999999)
        made = await bob.call_tool("own_shelf_create", {**book, "author": bobs})
        assert not made.is_error, made
        key = made.structured_content["id"]
        pointed = await bob.call_tool("own_shelf_update", {"id": key, "author": carols})
        assert pointed.is_error
        assert pointed.content[0].text == invalid_author(carols)
        assert (await bob.call_tool("own_shelf_get", {"id": key})).structured_content[
            "author__name"
        ] == "Bob Writer"
        renamed = await bob.call_tool("own_shelf_update", {"id": key, "title": "Bob's Second"})
        assert not renamed.is_error, renamed  # an update leaving the author alone is not refused for it
    async with sdk_client(server.url, data["tokens"]["carol"]) as carol:
        refused = await carol.call_tool(
            "own_shelf_create", {"title": "Carol's", "author": bobs, "year": 2000, "isbn": "carol-2"}
        )
        assert refused.content[0].text == invalid_author(bobs)
