"""``expose_viewset`` against a live server, through the official client, as users with different rights.

``tests/drfapp`` exposes ``ShelfViewSet`` as ``drf_books_*`` (its permission class lets only users with
``catalogue.change_book`` write: carol may, bob may not), ``LoanViewSet`` as ``drf_loans_*`` (a user sees
their own loans and the library's, and may change only their own; ``destroy`` also needs
``catalogue.delete_loan`` by the registry's own permission) and ``AuthorViewSet`` as ``drf_authors_*``
(3 calls a minute per user). The official client validates every ``structuredContent`` against the tool's
``outputSchema``: a schema that did not fit the answers would fail these tests.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from tests.support.auth import make_fixtures, sdk_client
from tests.support.live import ROOT, LiveServer

Fixtures = tuple[LiveServer, dict[str, Any]]


@pytest.fixture(scope="module")
def site(start: Callable[..., LiveServer]) -> Fixtures:
    server = start()
    return server, make_fixtures(server)


def _shell(server: LiveServer, code: str) -> str:
    """Run Python in the server's environment (its database), after ``django.setup()``; returns stdout."""
    done = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup()\n{code}"],
        cwd=ROOT,
        env=server.env,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def query_of(link: str, name: str) -> str:
    return parse_qs(urlparse(link).query)[name][0]


async def test_reads_pages_search_and_the_listed_schemas(site: Fixtures) -> None:
    server, data = site
    async with sdk_client(server.url, data["tokens"]["bob"]) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        listing = tools["drf_books_list"]
        assert set(listing.input_schema["properties"]) == {"page", "search", "ordering"}
        assert listing.annotations.read_only_hint is True
        create = tools["drf_books_create"].input_schema
        assert set(create["required"]) == {"title", "author", "year", "isbn"}
        assert "id" not in create["properties"]  # read-only fields are no input
        assert "copies_available" not in create["properties"]
        assert create["properties"]["cover"]["enum"] == ["paper", "hard"]
        assert create["properties"]["author"]["required"] == ["name"]
        output = tools["drf_books_retrieve"].output_schema
        assert "cover" not in output["properties"]  # write-only fields are no output
        assert output["properties"]["author"]["properties"]["id"]["type"] == "integer"
        assert tools["drf_books_destroy"].annotations.destructive_hint is True
        assert tools["drf_books_update"].annotations.idempotent_hint is True
        assert tools["drf_books_restock"].annotations.read_only_hint is False

        first = await client.call_tool("drf_books_list", {})
        assert not first.is_error, first
        page = first.structured_content
        assert page["count"] == 8
        assert len(page["results"]) == 3
        assert page["previous"] is None
        titles = [book["title"] for book in page["results"]]
        assert titles == sorted(titles)
        assert page["results"][0]["added_by"] == "bob"  # the serializer saw bob as request.user
        second = await client.call_tool("drf_books_list", {"page": int(query_of(page["next"], "page"))})
        assert not second.is_error, second
        assert {b["id"] for b in second.structured_content["results"]}.isdisjoint(
            {b["id"] for b in page["results"]}
        )

        found = await client.call_tool("drf_books_list", {"search": "calvino", "ordering": "-year"})
        assert not found.is_error, found
        years = [book["year"] for book in found.structured_content["results"]]
        assert found.structured_content["count"] == 2
        assert years == sorted(years, reverse=True)
        assert {b["author"]["name"] for b in found.structured_content["results"]} == {"Italo Calvino"}

        one = await client.call_tool("drf_books_retrieve", {"pk": page["results"][0]["id"]})
        assert not one.is_error, one
        assert one.structured_content["title"] == titles[0]
        missing = await client.call_tool("drf_books_retrieve", {"pk": 999999})
        assert missing.is_error
        assert missing.content[0].text.startswith("Not found: ")
        odd = await client.call_tool("drf_books_list", {"colour": "red"})
        assert odd.is_error
        assert odd.content[0].text == "Unknown argument(s): colour"


async def test_the_viewsets_permission_class_decides_who_writes(site: Fixtures) -> None:
    server, data = site
    book = {"title": "Written by carol", "author": {"name": "New Author"}, "year": 2001, "isbn": "D-1"}
    async with sdk_client(server.url, data["tokens"]["bob"]) as client:  # bob lacks change_book
        refused = await client.call_tool("drf_books_create", book)
        assert refused.is_error
        assert refused.content[0].text == "Permission denied: Only catalogue editors may change books."
    async with sdk_client(server.url, data["tokens"]["carol"]) as client:
        made = await client.call_tool("drf_books_create", {**book, "cover": "hard"})
        assert not made.is_error, made
        created = made.structured_content
        assert created["author"]["name"] == "New Author"
        assert created["copies_available"] == 1
        assert created["added_by"] == "carol"
        changed = await client.call_tool("drf_books_partial_update", {"pk": created["id"], "year": 2003})
        assert not changed.is_error, changed
        assert changed.structured_content["year"] == 2003
        assert changed.structured_content["title"] == "Written by carol"
        replaced = await client.call_tool(
            "drf_books_update",
            {"pk": created["id"], "title": "Renamed", "author": {"name": "Other Author"}, "year": 2004,
             "isbn": "D-1"},
        )  # fmt: skip
        assert not replaced.is_error, replaced
        assert replaced.structured_content["author"]["name"] == "Other Author"
        restocked = await client.call_tool("drf_books_restock", {"pk": created["id"], "copies": 4})
        assert not restocked.is_error, restocked
        assert restocked.structured_content == {"id": created["id"], "copies_available": 5}
        too_many = await client.call_tool("drf_books_restock", {"pk": created["id"], "copies": 11})
        assert too_many.is_error
        assert too_many.content[0].text == (
            "Invalid arguments: copies: Ensure this value is less than or equal to 10."
        )
        gone = await client.call_tool("drf_books_destroy", {"pk": created["id"]})
        assert not gone.is_error, gone
        assert gone.structured_content == {"deleted": created["id"]}
        again = await client.call_tool("drf_books_retrieve", {"pk": created["id"]})
        assert again.is_error
        assert again.content[0].text.startswith("Not found: ")


async def test_an_action_without_its_own_serializer_requires_only_its_lookup(site: Fixtures) -> None:
    server, data = site
    book = {"title": "Withdrawn", "author": {"name": "Withdrawing Author"}, "year": 1999, "isbn": "WD-1"}
    async with sdk_client(server.url, data["tokens"]["carol"]) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        schema = tools["drf_books_withdraw"].input_schema
        assert schema["required"] == ["pk"]  # the viewset's fields are offered, not required: it reads none
        assert schema["properties"]["author"]["required"] == ["name"]  # a nested object, if given, is whole
        made = await client.call_tool("drf_books_create", book)
        assert not made.is_error, made
        key = made.structured_content["id"]
        withdrawn = await client.call_tool("drf_books_withdraw", {"pk": key})
        assert not withdrawn.is_error, withdrawn
        assert withdrawn.structured_content == {"id": key, "copies_available": 0}
    async with sdk_client(server.url, data["tokens"]["bob"]) as client:  # bob lacks change_book
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert tools["drf_books_withdraw"].input_schema["required"] == ["pk"]
        refused = await client.call_tool("drf_books_withdraw", {"pk": key})
        assert refused.is_error
        assert refused.content[0].text == "Permission denied: Only catalogue editors may change books."


async def test_validation_errors_name_each_field_and_write_nothing(site: Fixtures) -> None:
    server, data = site
    async with sdk_client(server.url, data["tokens"]["carol"]) as client:
        bad = await client.call_tool(
            "drf_books_create",
            {"title": "x" * 301, "author": {"name": "lower case"}, "year": 3000, "cover": "leather"},
        )
        assert bad.is_error
        text = bad.content[0].text
        assert text.startswith("Invalid arguments: ")
        assert "title: Ensure this field has no more than 300 characters." in text
        assert "author.name: Start the name with a capital letter." in text
        assert "year: A book from the future?" in text
        assert "isbn: This field is required." in text
        assert 'cover: "leather" is not a valid choice.' in text
        missing_name = await client.call_tool(
            "drf_books_create", {"title": "T", "author": {}, "year": 1990, "isbn": "D-2"}
        )
        assert missing_name.content[0].text == "Invalid arguments: author.name: This field is required."
        duplicate = await client.call_tool(
            "drf_books_create",
            {"title": "T", "author": {"name": "Someone New"}, "year": 1990, "isbn": "9780547773742"},
        )
        assert duplicate.content[0].text == "Invalid arguments: isbn: book with this isbn already exists."
        # tests/authapp's post_save receiver fails the save of a book titled "Rollback me", after the new
        # author was written: the transaction around the view leaves neither
        failed = await client.call_tool(
            "drf_books_create",
            {"title": "Rollback me", "author": {"name": "Rolled Back"}, "year": 1990, "isbn": "D-3"},
        )
        assert failed.is_error
        # an unexpected exception: its text stays on the server (ERROR_DETAIL is off)
        assert failed.content[0].text == "Error executing tool drf_books_create: internal error"
    left = _shell(
        server,
        "from project.catalogue.models import Author, Book\n"
        "print(Author.objects.filter(name__in=['Rolled Back', 'Someone New']).count(),"
        " Book.objects.filter(isbn__startswith='D-').count())",
    )
    assert left.split() == ["0", "0"]


async def test_get_queryset_and_object_permissions_per_user(site: Fixtures) -> None:
    server, data = site
    _shell(
        server,
        "from project.catalogue.models import Book, Loan\n"
        "book = Book.objects.order_by('pk').first()\n"
        "for who in ['alice', 'library', 'library', 'bob']:\n"
        "    Loan.objects.create(book=book, borrower=who)\n",
    )
    async with sdk_client(server.url, data["tokens"]["bob"]) as client:
        first = await client.call_tool("drf_loans_list", {})
        assert not first.is_error, first
        assert len(first.structured_content["results"]) == 2  # cursor pages of 2
        cursor = query_of(first.structured_content["next"], "cursor")
        rest = await client.call_tool("drf_loans_list", {"cursor": cursor})
        assert not rest.is_error, rest
        seen = first.structured_content["results"] + rest.structured_content["results"]
        assert sorted(loan["borrower"] for loan in seen) == ["bob", "library", "library"]  # not alice's
        assert rest.structured_content["next"] is None
        own = next(loan for loan in seen if loan["borrower"] == "bob")
        shared = next(loan for loan in seen if loan["borrower"] == "library")

        moved = await client.call_tool("drf_loans_partial_update", {"pk": own["id"], "book": own["book"]})
        assert not moved.is_error, moved
        refused = await client.call_tool("drf_loans_partial_update", {"pk": shared["id"], "book": 1})
        assert refused.is_error  # seen (get_queryset) but not his (has_object_permission)
        assert refused.content[0].text == "Permission denied: Only the borrower may change this loan."
        alices = await client.call_tool("drf_loans_retrieve", {"pk": own["id"] - 3})
        assert alices.is_error
        assert alices.content[0].text.startswith("Not found: ")

        made = await client.call_tool("drf_loans_create", {"book": own["book"]})
        assert not made.is_error, made
        assert made.structured_content["borrower"] == "bob"  # perform_create used request.user
        assert re.match(r"\d{4}-\d\d-\d\dT", made.structured_content["created"])
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "drf_loans_destroy" not in names  # the registry's own permission, on top of the viewset's
        with pytest.raises(MCPError, match="Unknown tool"):
            await client.call_tool("drf_loans_destroy", {"pk": own["id"]})
    async with sdk_client(server.url, data["tokens"]["alice"]) as client:
        mine = await client.call_tool("drf_loans_list", {})
        assert sorted(loan["borrower"] for loan in mine.structured_content["results"]) == ["alice", "library"]


async def test_anonymous_callers_meet_the_viewsets_permissions(site: Fixtures) -> None:
    server, _data = site
    async with (
        httpx2.AsyncClient(timeout=30) as http,
        Client(streamable_http_client(server.url, http_client=http)) as client,
    ):
        refused = await client.call_tool("drf_books_list", {})
        assert refused.is_error
        assert refused.content[0].text == ("Permission denied: Authentication credentials were not provided.")


async def test_throttling_says_when_to_retry(site: Fixtures) -> None:
    server, data = site
    async with sdk_client(server.url, data["tokens"]["dave"]) as client:
        for _ in range(3):  # FewCallsThrottle: 3 a minute per user
            allowed = await client.call_tool("drf_authors_list", {})
            assert not allowed.is_error, allowed
            assert allowed.structured_content["items"]
        throttled = await client.call_tool("drf_authors_retrieve", {"pk": 1})
        assert throttled.is_error
        text = throttled.content[0].text
        assert re.fullmatch(
            r"Throttled: Request was throttled\. Expected available in \d+ seconds?\. "
            r"Retry after \d+ seconds\.",
            text,
        ), text
    async with sdk_client(server.url, data["tokens"]["bob"]) as client:  # another user: his own count
        assert not (await client.call_tool("drf_authors_list", {})).is_error


async def test_a_token_scoped_to_reads_cannot_write(site: Fixtures) -> None:
    server, data = site
    async with sdk_client(server.url, data["tokens"]["carol_drf_reads"]) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names == {"drf_books_list", "drf_books_retrieve"}
        assert not (await client.call_tool("drf_books_list", {})).is_error
        with pytest.raises(MCPError, match="Insufficient scope"):  # carol may create: the scope lacks it
            await client.call_tool(
                "drf_books_create", {"title": "T", "author": {"name": "A"}, "year": 1, "isbn": "WD-1"}
            )


async def test_the_demo_api_serves_http_and_mcp_with_the_same_rules(site: Fixtures) -> None:
    """project/catalogue/api.py's BookViewSet, routed at /api/books/ and exposed as catalogue_books_*."""
    server, data = site
    async with httpx2.AsyncClient(timeout=30) as http:
        over_http = (await http.get(f"{server.base}/api/books/", params={"search": "le guin"})).json()
        async with Client(streamable_http_client(server.url, http_client=http)) as client:
            over_mcp = await client.call_tool("catalogue_books_list", {"search": "le guin"})
            assert not over_mcp.is_error, over_mcp
            assert over_mcp.structured_content["results"] == over_http["results"]
            assert over_mcp.structured_content["count"] == 2
            refused = await client.call_tool("catalogue_books_reserve", {"pk": 1, "borrower": "Ann"})
            assert refused.content[0].text == (
                "Permission denied: Authentication credentials were not provided."
            )
    async with sdk_client(server.url, data["tokens"]["carol"]) as client:  # signed in, not staff
        refused = await client.call_tool("catalogue_books_reserve", {"pk": 1, "borrower": "Ann"})
        assert refused.content[0].text == "Permission denied: Only library staff may change the catalogue."
    async with sdk_client(server.url, data["tokens"]["sam"]) as client:  # staff
        before = await client.call_tool("catalogue_books_retrieve", {"pk": 1})
        reserved = await client.call_tool("catalogue_books_reserve", {"pk": 1, "borrower": "Ann"})
        assert not reserved.is_error, reserved
        left = before.structured_content["copies_available"] - 1
        assert reserved.structured_content["copies_available"] == left  # an @action's object, as given
        empty = await client.call_tool("catalogue_books_reserve", {"pk": 1, "borrower": ""})
        assert empty.content[0].text == "Invalid arguments: borrower: This field may not be blank."
