"""``expose_model`` in process: where the rows come from (a queryset, or one built per call), cursors, and the
bounds of the write tools (``queryset=``, ``related_querysets=``, a foreign key's ``limit_choices_to``)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured

from mcp_server import MCPServer
from mcp_server.core.context import Context, SessionState
from mcp_server.expose.models import expose_model
from mcp_server.protocol.pagination import encode_cursor
from project.catalogue.models import Author, Book
from tests.testapp.models import PickyBook

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def shelf() -> dict[str, Book]:
    """Three books of one author, ISBNs prefixed ``T-`` so that no other row is taken for them."""
    author = Author.objects.create(name="Test Author of models_as_tools")
    return {
        isbn: Book.objects.create(title=title, author=author, year=year, isbn=isbn)
        for isbn, title, year in [("T-1", "Early", 1961), ("T-2", "Middle", 1975), ("T-3", "Late", 1999)]
    }


def structured(result: dict[str, Any]) -> dict[str, Any]:
    assert not result.get("isError"), result
    content: dict[str, Any] = result["structuredContent"]
    return content


async def test_a_queryset_limits_what_both_tools_reach(shelf: dict[str, Book]) -> None:
    server = MCPServer("qs")
    expose_model(
        server,
        Book,
        fields=["isbn", "title"],
        lookup="isbn",
        queryset=Book.objects.filter(isbn__startswith="T-", year__lt=1990),
        permission=None,
    )
    listed = structured(await server.tools["book_list"].call({}, None))
    assert [b["isbn"] for b in listed["items"]] == ["T-1", "T-2"]
    assert structured(await server.tools["book_get"].call({"isbn": "T-2"}, None)) == {
        "isbn": "T-2",
        "title": "Middle",
    }
    outside = await server.tools["book_get"].call({"isbn": "T-3"}, None)  # exists, but not in the queryset
    assert outside["isError"] is True
    assert outside["content"][0]["text"] == "No book with isbn 'T-3'"


async def test_a_callable_builds_the_queryset_from_each_calls_context(shelf: dict[str, Book]) -> None:
    server = MCPServer("per-call")
    seen: list[Any] = []

    class Caller:  # stands for the request's Context: the callable decides from it
        def __init__(self, since: int) -> None:
            self.since = since

    def books_since(ctx: Any) -> Any:
        seen.append(ctx)
        return Book.objects.filter(isbn__startswith="T-", year__gte=ctx.since)

    expose_model(server, Book, fields=["isbn"], lookup="isbn", queryset=books_since, permission=None)
    recent, all_of_them = Caller(1970), Caller(0)
    assert [b["isbn"] for b in structured(await server.tools["book_list"].call({}, recent))["items"]] == [
        "T-3",  # "Late" before "Middle": the model's ordering, by title
        "T-2",
    ]
    assert len(structured(await server.tools["book_list"].call({}, all_of_them))["items"]) == 3
    assert (await server.tools["book_get"].call({"isbn": "T-1"}, recent))["isError"] is True
    assert structured(await server.tools["book_get"].call({"isbn": "T-1"}, all_of_them)) == {"isbn": "T-1"}
    assert seen == [recent, all_of_them, recent, all_of_them]


def cursor(payload: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


@pytest.mark.parametrize("payload", [{"o": -2}, {"o": "2"}, {"o": 1.5}, {"offset": 2}, [2]])
async def test_a_cursor_must_carry_a_non_negative_offset(shelf: dict[str, Book], payload: Any) -> None:
    server = MCPServer("cursors")
    queryset = Book.objects.filter(isbn__startswith="T-")
    expose_model(server, Book, fields=["isbn"], queryset=queryset, permission=None)
    refused = await server.tools["book_list"].call({"cursor": cursor(payload)}, None)
    assert refused["isError"] is True
    assert refused["content"][0]["text"] == "Invalid cursor"
    page = structured(await server.tools["book_list"].call({"cursor": cursor({"o": 2})}, None))
    assert [b["isbn"] for b in page["items"]] == ["T-2"]  # Early, Late, then Middle: ordered by title


async def test_the_list_cursor_is_the_protocols(shelf: dict[str, Book]) -> None:
    server = MCPServer("codec")
    expose_model(
        server, Book, fields=["isbn"], queryset=Book.objects.filter(isbn__startswith="T-"), permission=None
    )
    first = structured(await server.tools["book_list"].call({"limit": 1}, None))
    assert first["next_cursor"] == encode_cursor(1)  # the list methods' codec, not one of its own
    second = structured(
        await server.tools["book_list"].call({"limit": 1, "cursor": first["next_cursor"]}, None)
    )
    assert [b["isbn"] for b in second["items"]] == ["T-3"]  # Early, Late, then Middle: ordered by title


async def test_delete_and_the_write_permissions(shelf: dict[str, Book]) -> None:
    server = MCPServer("writes")
    names = expose_model(
        server,
        Book,
        fields=["isbn", "title"],
        lookup="isbn",
        queryset=Book.objects.filter(isbn__startswith="T-", year__lt=1990),
        writes=["update", "delete"],
        write_permissions={"delete": "catalogue.remove_books_for_good"},
    )
    assert names == ("book_list", "book_get", "book_update", "book_delete")
    assert server.tools["book_list"].permission == "catalogue.view_book"
    assert server.tools["book_update"].permission == "catalogue.change_book"
    assert server.tools["book_delete"].permission == "catalogue.remove_books_for_good"
    assert server.tools["book_delete"].annotations == {
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": True,
    }
    assert "book_create" not in server.tools
    outside = await server.tools["book_delete"].call({"isbn": "T-3"}, None)  # not in the queryset
    assert outside["isError"] is True
    assert await Book.objects.filter(isbn="T-3").aexists()
    assert structured(await server.tools["book_delete"].call({"isbn": "T-1"}, None)) == {"deleted": "T-1"}
    assert not await Book.objects.filter(isbn="T-1").aexists()


def test_writes_refuse_unknown_operations() -> None:
    with pytest.raises(ImproperlyConfigured, match="unknown write operations"):
        expose_model(MCPServer("bad"), Book, fields=["isbn"], writes=["upsert"])


async def test_deleting_a_protected_row_is_a_tool_error(shelf: dict[str, Book]) -> None:
    server = MCPServer("protected")
    expose_model(server, Author, fields=["name"], lookup="name", writes=["delete"], permission=None)
    refused = await server.tools["author_delete"].call({"name": "Test Author of models_as_tools"}, None)
    assert refused["isError"] is True
    assert refused["content"][0]["text"] == "Cannot delete this author: other rows refer to it"
    assert await Author.objects.filter(name="Test Author of models_as_tools").aexists()


OUTSIDE = "Refused: the book would fall outside the rows this tool reaches (nothing was written)"


class RecordingClaim:
    """An ``AnswerClaim`` that records its calls."""

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    async def reserve(self, using: str | None) -> None:
        self.calls.append("reserve")

    def confirm(self, using: str) -> None:
        self.calls.append("confirm")


def claiming(server: MCPServer, calls: list[str]) -> Context:
    ctx = Context(server, SessionState("s", "2025-11-25"), 1, "tools/call", {}, peer=None)
    ctx.claim = RecordingClaim(calls)
    return ctx


async def test_a_write_whose_row_leaves_the_queryset_is_refused_and_rolled_back(
    shelf: dict[str, Book],
) -> None:
    server = MCPServer("bounded-writes")
    expose_model(
        server,
        Book,
        fields=["isbn", "title", "author", "year"],
        lookup="isbn",
        queryset=Book.objects.filter(isbn__startswith="T-", year__lt=1990),
        writes=["create", "update"],
        permission=None,
        write_permissions={"create": None, "update": None},
    )
    update, create = server.tools["book_update"], server.tools["book_create"]
    claims: list[str] = []
    moved = await update.call({"isbn": "T-1", "year": 1995, "title": "Moved"}, claiming(server, claims))
    assert moved["isError"] is True
    assert moved["content"][0]["text"] == OUTSIDE
    assert "structuredContent" not in moved
    assert claims == []  # refused before the answer is claimed
    early = await Book.objects.aget(isbn="T-1")
    assert (early.year, early.title) == (1961, "Early")  # rolled back
    author = shelf["T-1"].author_id
    made = await create.call({"isbn": "T-9", "title": "Too Late", "author": author, "year": 2001}, None)
    assert made["content"][0]["text"] == OUTSIDE
    assert not await Book.objects.filter(isbn="T-9").aexists()
    kept = structured(await create.call({"isbn": "T-8", "title": "In", "author": author, "year": 1980}, None))
    assert kept == {"isbn": "T-8", "title": "In", "author": author, "year": 1980}
    assert (
        structured(await update.call({"isbn": "T-2", "year": 1989}, claiming(server, claims)))["year"] == 1989
    )
    assert claims == ["reserve", "confirm"]


async def test_related_querysets_limit_what_a_foreign_key_names(shelf: dict[str, Book]) -> None:
    hidden = await Author.objects.acreate(name="Hidden author of models_as_tools")
    visible = shelf["T-1"].author_id
    server = MCPServer("related")

    def caller(username: str) -> Context:  # a request's Context, as the stdio transport makes it
        user = get_user_model()(username=username)
        return Context(server, SessionState("s", "2025-11-25"), 1, "tools/call", {}, peer=None, user=user)

    def authors(ctx: Context) -> Any:  # only "editor" sees the hidden author
        everyone = Author.objects.all()
        return everyone if ctx.user.get_username() == "editor" else everyone.exclude(pk=hidden.pk)

    with pytest.raises(
        ImproperlyConfigured, match=r"related_querysets\['title'\] is not a writable foreign key"
    ):
        expose_model(
            MCPServer("a"), Book, fields=["isbn", "title"], writes=True, related_querysets={"title": authors}
        )
    with pytest.raises(ImproperlyConfigured, match="related_querysets needs writes="):
        expose_model(MCPServer("b"), Book, fields=["isbn", "author"], related_querysets={"author": authors})
    expose_model(
        server,
        Book,
        fields=["isbn", "title", "author", "author__name"],
        lookup="isbn",
        queryset=Book.objects.filter(isbn__startswith="T-"),
        writes=["update"],
        permission=None,
        write_permissions={"update": None},
        related_querysets={"author": authors},
    )
    update = server.tools["book_update"]
    refused = await update.call({"isbn": "T-1", "author": hidden.pk}, caller("reader"))
    assert refused["isError"] is True
    assert refused["content"][0]["text"] == (
        f"Invalid book: author: author instance with id {hidden.pk} is not a valid choice."
    )
    assert (await Book.objects.aget(isbn="T-1")).author_id == visible
    both = await update.call({"isbn": "T-1", "author": hidden.pk, "title": ""}, caller("reader"))
    assert both["content"][0]["text"] == (  # with full_clean's own errors, in one message
        "Invalid book: title: This field cannot be blank.; "
        f"author: author instance with id {hidden.pk} is not a valid choice."
    )
    moved = structured(await update.call({"isbn": "T-1", "author": hidden.pk}, caller("editor")))
    assert moved["author__name"] == "Hidden author of models_as_tools"


async def test_a_foreign_keys_limit_choices_to_holds(shelf: dict[str, Book]) -> None:
    picky = await Author.objects.acreate(name="Picky Author")
    server = MCPServer("picky")
    expose_model(
        server,
        PickyBook,
        fields=["isbn", "title", "author", "year"],
        lookup="isbn",
        writes=["create"],
        permission=None,
        write_permissions={"create": None},
    )
    create = server.tools["pickybook_create"]
    book = {"isbn": "T-7", "title": "Picky", "year": 2000}
    other = shelf["T-1"].author_id  # "Test Author ...": not "Picky ..."
    refused = await create.call({**book, "author": other}, None)
    assert refused["content"][0]["text"] == (
        f"Invalid picky book: author: author instance with id {other} is not a valid choice."
    )
    assert not await Book.objects.filter(isbn="T-7").aexists()
    assert structured(await create.call({**book, "author": picky.pk}, None))["author"] == picky.pk
