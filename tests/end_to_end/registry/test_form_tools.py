"""``expose_form`` against a live server, through the official client, as two users.

``tests/authapp/mcp.py`` exposes ``AuthorForm`` (a ModelForm, default permission ``catalogue.add_author``:
carol has it, bob not) as ``author_add`` and ``LoanRequestForm`` (a Form with a handler, permission
``catalogue.add_loan``: bob has it, carol not) as ``loan_request``. A ``post_save`` receiver fails any save of
an author named "Rollback Me". ``book_shelve`` (a ModelForm of books whose ``author`` field's queryset
holds only authors named "Shelved ...") and ``picky_book_add`` (a ModelForm of ``PickyBook``, whose foreign
key's ``limit_choices_to`` admits only authors named "Picky ...") need ``catalogue.add_book``: carol has it,
bob not.
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


async def test_the_schemas_come_from_the_forms_fields(site: Fixtures) -> None:
    server, data = site
    async with sdk_client(server.url, data["tokens"]["bob"]) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    loan = tools["loan_request"]
    assert loan.description == "Ask to borrow a book."
    schema = loan.input_schema
    assert set(schema["required"]) == {"borrower", "book", "weeks", "where"}  # note is optional
    props = schema["properties"]
    assert props["borrower"]["type"] == "string"
    assert props["borrower"]["maxLength"] == 20
    assert props["book"]["type"] == "integer"  # a ModelChoiceField takes the row's key
    assert props["weeks"]["type"] == "integer"
    assert props["weeks"]["minimum"] == 1
    assert props["weeks"]["maximum"] == 8
    assert props["where"]["enum"] == ["home", "reading_room"]
    assert loan.annotations is not None
    assert loan.annotations.read_only_hint is False
    assert "author_add" not in tools  # bob lacks catalogue.add_author


async def test_a_form_tool_validates_and_calls_its_handler(site: Fixtures) -> None:
    server, data = site
    async with sdk_client(server.url, data["tokens"]["bob"]) as client:
        books = await client.call_tool("shelf_list", {"limit": 1})
        book = books.structured_content["items"][0]
        ok = await client.call_tool(
            "loan_request", {"borrower": "Bob", "book": book["id"], "weeks": 3, "where": "home"}
        )
        assert not ok.is_error, ok
        assert ok.structured_content == {"book": book["title"], "borrower": "Bob", "weeks": 3, "by": "bob"}
        bad = await client.call_tool(
            "loan_request", {"borrower": "Bob", "book": 999999, "weeks": 3, "where": "reading_room"}
        )
        assert bad.is_error
        text = bad.content[0].text
        assert text.startswith("Invalid input: ")
        assert "book: Select a valid choice. That choice is not one of the available choices." in text
        whole = await client.call_tool(
            "loan_request", {"borrower": "Bob", "book": book["id"], "weeks": 3, "where": "reading_room"}
        )
        assert whole.is_error
        assert whole.content[0].text == "Invalid input: __all__: The reading room lends for one week at most."
        with pytest.raises(MCPError, match="Unknown tool"):
            await client.call_tool("author_add", {"name": "Bob's Author"})
    async with sdk_client(server.url, data["tokens"]["carol"]) as client:
        with pytest.raises(MCPError, match="Unknown tool"):  # carol lacks catalogue.add_loan
            await client.call_tool("loan_request", {"borrower": "C", "book": 1, "weeks": 1, "where": "home"})


async def test_a_model_form_saves_in_a_transaction(site: Fixtures) -> None:
    server, data = site
    async with sdk_client(server.url, data["tokens"]["carol"]) as client:
        made = await client.call_tool("author_add", {"name": "Test Author From A Form"})
        assert not made.is_error, made
        assert made.structured_content["name"] == "Test Author From A Form"
        assert isinstance(made.structured_content["id"], int)
        again = await client.call_tool("author_add", {"name": "Test Author From A Form"})
        assert again.is_error
        assert again.content[0].text == "Invalid input: name: Author with this Name already exists."
        lower = await client.call_tool("author_add", {"name": "octavia"})
        assert lower.content[0].text == "Invalid input: name: Start the name with a capital letter."
        failed = await client.call_tool("author_add", {"name": "Rollback Me"})
        assert failed.is_error
        # the row the failed save wrote was rolled back: the same name is free, not "already exists"
        with_receiver = await client.call_tool("author_add", {"name": "Rollback Me"})
        assert with_receiver.is_error
        assert "already exists" not in with_receiver.content[0].text


async def test_the_demo_sites_form_tools(site: Fixtures) -> None:
    """project/catalogue: ``return_book`` (a Form whose handler ends a loan and claims its answer, needs
    ``catalogue.delete_loan``: dora has it) and ``add_author`` (a ModelForm: carol may add authors)."""
    server, data = site
    async with sdk_client(server.url, data["tokens"]["dora"]) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert "return_book" in tools
        assert "add_author" not in tools
        [book] = (await client.call_tool("search_books", {"query": "", "limit": 1})).structured_content[
            "result"
        ]
        reserved = await client.call_tool("reserve_book", {"book_id": book["id"], "borrower": "Dora"})
        assert not reserved.is_error, reserved
        loan = int(reserved.content[0].text.split("(loan ", 1)[1].split(")", 1)[0])

        wrong = await client.call_tool("return_book", {"loan": loan, "borrower": "Somebody Else"})
        assert wrong.is_error
        assert wrong.content[0].text == "Invalid input: __all__: This loan is not in that borrower's name."
        returned = await client.call_tool("return_book", {"loan": loan, "borrower": "Dora"})
        assert not returned.is_error, returned
        assert returned.structured_content == {"returned": book["title"], "by": "Dora"}
        again = await client.call_tool("return_book", {"loan": loan, "borrower": "Dora"})
        assert again.is_error
        assert again.content[0].text.startswith("Invalid input: loan: Select a valid choice.")
        after = await client.call_tool("get_book", {"book_id": book["id"]})
        assert after.structured_content["copies_available"] == book["copies_available"]
    async with sdk_client(server.url, data["tokens"]["carol"]) as client:
        added = await client.call_tool("add_author", {"name": "An Author Added Through The Demo"})
        assert not added.is_error, added
        assert added.structured_content["name"] == "An Author Added Through The Demo"
        assert isinstance(added.structured_content["id"], int)


NOT_A_CHOICE = (
    "Invalid input: author: Select a valid choice. That choice is not one of the available choices."
)


async def test_a_model_forms_choices_limit_the_rows_a_key_may_name(site: Fixtures) -> None:
    server, data = site
    made = shell(
        server,
        "import json; from project.catalogue.models import Author; "
        "names = ('Shelved One', 'Picky One', 'Other One'); "
        "print(json.dumps({n: Author.objects.get_or_create(name=n)[0].pk for n in names}))",
    )
    authors = json.loads(made.strip().splitlines()[-1])
    async with sdk_client(server.url, data["tokens"]["carol"]) as client:
        for tool, allowed, isbn in [
            ("book_shelve", "Shelved One", "F-1"),
            ("picky_book_add", "Picky One", "F-2"),
        ]:
            book = {"title": f"Through {tool}", "year": 2000, "isbn": isbn}
            for outside in ("Other One", "Shelved One" if allowed == "Picky One" else "Picky One"):
                refused = await client.call_tool(tool, {**book, "author": authors[outside]})
                assert refused.is_error
                assert refused.content[0].text == NOT_A_CHOICE
            missing = await client.call_tool(tool, {**book, "author": 999999})
            assert missing.content[0].text == NOT_A_CHOICE  # the same as for a row outside the choices
            saved = await client.call_tool(tool, {**book, "author": authors[allowed]})
            assert not saved.is_error, saved  # the same ISBN is free: the refusals wrote nothing
            assert saved.structured_content["author"] == authors[allowed]
            assert saved.structured_content["isbn"] == isbn
    async with sdk_client(server.url, data["tokens"]["bob"]) as client:  # bob lacks catalogue.add_book
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert not tools & {"book_shelve", "picky_book_add"}
        with pytest.raises(MCPError, match="Unknown tool"):
            await client.call_tool(
                "book_shelve", {"title": "t", "year": 1, "isbn": "F-4", "author": authors["Shelved One"]}
            )
