"""A site we did not write, with the documented Django REST framework example
(``docs/howto/expose-viewsets.md``): ``startproject``, the installation and authentication steps, an app
``library`` with the models the page describes, and the page's ``library/api.py``, ``settings.py`` and
``library/mcp.py`` blocks as written. Two users with different rights call the resulting tools with the
official client over their own tokens.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.auth import sdk_client
from tests.support.new_site import SITE, build_site, doc_blocks, run, serve

Site = tuple[Path, dict[str, str], dict[str, int]]
"""The site's directory, a token per user, the keys of the seeded author and book."""

SECTION = "howto/expose-viewsets"

MODELS = """
from django.db import models


class Author(models.Model):
    name = models.CharField(max_length=200)


class Book(models.Model):
    title = models.CharField(max_length=300)
    author = models.ForeignKey(Author, on_delete=models.PROTECT)
    year = models.PositiveIntegerField()
    isbn = models.CharField(max_length=20, unique=True)


class Loan(models.Model):
    book = models.ForeignKey(Book, on_delete=models.CASCADE)
    borrower = models.CharField(max_length=150)
"""

SEED = """
from django.contrib.auth.models import Permission, User
from library.models import Author, Book

editor = User.objects.create_user("editor")
editor.user_permissions.add(Permission.objects.get(codename="change_book"))
User.objects.create_user("reader")
author = Author.objects.create(name="Italo Calvino")
book = Book.objects.create(title="Invisible Cities", author=author, year=1972, isbn="978-0156453806")
print(json.dumps({"author": author.pk, "book": book.pk}))
"""


@pytest.fixture(scope="module")
def library_site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    directory = build_site(tmp_path_factory.mktemp("new-site-api") / "site", protected=True)
    blocks = doc_blocks(SECTION)
    run(directory, "manage.py", "startapp", "library")
    (directory / "library" / "models.py").write_text(MODELS)
    (directory / "library" / "api.py").write_text(blocks["library/api.py"])
    (directory / "library" / "mcp.py").write_text(blocks["library/mcp.py"])
    with (directory / SITE / "settings.py").open("a") as out:
        out.write('\nINSTALLED_APPS += ["library"]\n' + blocks["settings.py"])
    run(directory, "manage.py", "makemigrations", "library", "-v0")
    run(directory, "manage.py", "migrate", "-v0")
    printed = run(directory, "manage.py", "shell", "-c", "import json\n" + SEED)
    seeded: dict[str, int] = json.loads(printed.strip().splitlines()[-1])
    tokens = {
        name: run(directory, "manage.py", "mcp_token", "create", name, "--name", "t").strip().splitlines()[-1]
        for name in ("editor", "reader")
    }
    return directory, tokens, seeded


async def test_the_documented_viewsets_serve_two_users_by_their_rights(
    library_site: Site,
) -> None:
    directory, tokens, seeded = library_site
    with serve(directory, "uvicorn") as url:
        async with sdk_client(url, tokens["reader"]) as reader, sdk_client(url, tokens["editor"]) as editor:
            names = {tool.name for tool in (await reader.list_tools()).tools}
            assert {f"books_{a}" for a in ("list", "retrieve", "create", "update", "destroy")} <= names
            assert {"loans_list", "loans_create"} <= names

            page = await reader.call_tool("books_list", {"search": "invisible"})
            assert not page.is_error, page
            assert page.structured_content["count"] == 1
            assert page.structured_content["results"][0]["author_name"] == "Italo Calvino"

            new_book = {
                "title": "Cosmicomics",
                "author": seeded["author"],
                "year": 1965,
                "isbn": "978-0156226004",
            }
            refused = await reader.call_tool("books_create", new_book)
            assert refused.is_error
            assert refused.content[0].text == "Permission denied: Only catalogue editors may change books."
            created = await editor.call_tool("books_create", new_book)
            assert not created.is_error, created
            assert created.structured_content["title"] == "Cosmicomics"
            invalid = await editor.call_tool("books_create", {**new_book, "title": ""})
            assert invalid.is_error
            assert "title: This field may not be blank." in invalid.content[0].text
            assert "isbn: book with this isbn already exists." in invalid.content[0].text

            loan = await reader.call_tool("loans_create", {"book": seeded["book"]})
            assert not loan.is_error, loan
            assert loan.structured_content["borrower"] == "reader"  # perform_create, with the caller as user
            loan_id = loan.structured_content["id"]
            mine = await reader.call_tool("loans_list", {})
            assert [item["id"] for item in mine.structured_content["items"]] == [loan_id]
            theirs = await editor.call_tool("loans_list", {})
            assert theirs.structured_content["items"] == []  # get_queryset: each user's own
            gone = await editor.call_tool("loans_destroy", {"pk": loan_id})
            assert gone.is_error
            assert gone.content[0].text.startswith("Not found")
