"""``expose_model`` in process: where the rows come from (a queryset, or one built per call) and cursors."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from mcp_server import MCPServer
from mcp_server.models_as_tools import expose_model
from project.catalogue.models import Author, Book

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
