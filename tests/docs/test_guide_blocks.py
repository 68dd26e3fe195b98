"""The how-to guides' blocks, run as the pages show them: each page's named blocks (``# library/mcp.py``,
``# settings.py``...) are written into a copy of one new site (``tests/support/guide_site.py``), Django is
set up there, the system checks must find nothing (or what the page says), and the tools the blocks define
are called, in process or through the site's ASGI application, for what the page says they do.

The tutorial's blocks and those of the installation, authentication, OAuth, deployment and Django REST
framework guides run in ``tests/end_to_end/test_tutorial.py`` and ``test_new_site*.py``;
``tests/docs/test_blocks_run.py`` fails for a block that no test runs.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.guide_site import build_library_site, copy_site, doc_fences, place_blocks, probe, variants
from tests.support.live import ROOT
from tests.support.new_site import SITE, site_env

Expect = Callable[[dict[str, Any], str], None]
"""What a probe's ``result`` and stderr must show."""


@dataclass(frozen=True)
class Case:
    probe: str
    expect: Expect
    checks: tuple[str, ...] = ()
    """The system check ids (warnings and errors) the page says the blocks give: none, unless it says."""
    env: dict[str, str] = field(default_factory=dict)


def text(page: str) -> str:
    return (ROOT / "docs" / f"{page}.md").read_text()


SEED = """
from django.contrib.auth.models import User
from library.models import Author, Book
calvino = Author.objects.create(name="Italo Calvino")
cities = Book.objects.create(title="Invisible Cities", author=calvino, year=1972, isbn="978-0156453806")
Book.objects.create(title="Cosmicomics", author=calvino, year=1965, isbn="978-0156226004")
"""


def installed(result: dict[str, Any], stderr: str) -> None:
    assert result["found"]["structuredContent"] == {
        "result": [{"id": result["pk"], "title": "Invisible Cities"}]
    }
    assert {"search_books", "reserve"} <= set(result["tools"])
    assert result["reserve"] == "library.add_loan"
    assert result["resources"] == ["library://books/{pk}"]
    assert result["prompts"] == ["summarize"]
    assert result["methods"] == ["library/reindex"]


def observed(result: dict[str, Any], stderr: str) -> None:
    assert result["metrics"] == {"with the token": 200, "without": 401}
    assert result["settings"] == ["METRICS_ACCESS", "TRACE_URL"]
    assert '"logger": "library", "message": "hello from the guide"' in stderr  # one JSON object a line


def reads(result: dict[str, Any], stderr: str) -> None:
    assert set(result["tools"]) >= {"books_list", "books_get"}
    assert not {"books_create", "books_update", "books_delete"} & set(result["tools"])
    listed = result["listed"]["structuredContent"]
    assert [item["title"] for item in listed["items"]] == ["Invisible Cities", "Cosmicomics"]  # -year
    assert set(listed["items"][0]) == {"id", "title", "year", "author__name"}
    assert listed["items"][0]["author__name"] == "Italo Calvino"


def writes(result: dict[str, Any], stderr: str) -> None:
    assert {f"books_{op}" for op in ("list", "get", "create", "update", "delete")} <= set(result["tools"])
    assert result["created"]["structuredContent"]["isbn"] == "978-0156439619"
    assert result["updated"]["structuredContent"]["year"] == 1979
    assert not result["deleted"].get("isError"), result["deleted"]


def bounded(result: dict[str, Any], stderr: str) -> None:
    refused = result["refused"]
    assert refused["isError"] is True
    message = refused["content"][0]["text"]
    assert message.endswith(f"author: author instance with id {result['theirs']} is not a valid choice.")
    assert "(`author: author instance with id 7 is not a valid choice.`)" in " ".join(
        text("howto/expose-models").split()
    )
    assert result["moved"]["content"][0]["text"] == message  # an update names the author the same way
    assert result["kept"]["structuredContent"]["title"] == "B, again"
    outside = result["outside"]["content"][0]["text"]
    assert outside == "Refused: the book would fall outside the rows this tool reaches (nothing was written)"
    assert outside in text("howto/expose-models")


def forms(result: dict[str, Any], stderr: str) -> None:
    assert result["permissions"] == ["library.add_author", "library.add_loan"]
    assert result["lent"]["structuredContent"] == {"book": "Invisible Cities", "by": "reader"}
    assert result["too_long"]["isError"] is True
    assert "weeks" in result["too_long"]["content"][0]["text"]
    assert not result["author"].get("isError"), result["author"]


def limited(result: dict[str, Any], stderr: str) -> None:
    assert result["settings"] == ["QUOTAS", "RATE_LIMITS"]
    assert result["served"] == 30  # {"per": "address", "target": "*", "rate": "30/minute"}
    limit = result["refused"]["data"]["limit"]
    assert (limit["name"], limit["rate"], limit["count"]) == (
        "address *",
        "30/minute",
        30,
    )  # "<per> <target>"


def tasks(result: dict[str, Any], stderr: str) -> None:
    assert result["tools"] == {
        "render_report": ["optional", "immediate"],
        "delete_archive": ["required", "detach"],
    }
    assert "io.modelcontextprotocol/tasks" in result["discover"]["result"]["capabilities"]["extensions"]
    refused = result["required"]["error"]
    assert refused["code"] == -32021
    assert refused["data"]["requiredCapabilities"] == {"extensions": {"io.modelcontextprotocol/tasks": {}}}


def several(result: dict[str, Any], stderr: str) -> None:
    assert result["staff"] == ["overdue_loans"]
    assert "overdue_loans" not in result["default"]
    staff = result["staff_discover"]["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]
    assert (staff["name"], staff["title"]) == ("library-staff", "Staff tools")
    assert result["staff_discover"]["result"]["instructions"] == "For library staff."
    default = result["default_discover"]["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]
    assert default["name"] != "library-staff"


def timed(result: dict[str, Any], stderr: str) -> None:
    assert result["added"]["result"]["structuredContent"] == {"result": 5}
    assert "tools/call 1 took " in stderr


def asked(result: dict[str, Any], stderr: str) -> None:
    answer = result["asked"]["result"]
    assert answer["resultType"] == "input_required"
    assert set(answer["inputRequests"]) == {"user_name", "idea", "roots"}  # one round, all three


def apps(result: dict[str, Any], stderr: str) -> None:
    uri = f"ui://{result['server']}/library/book_cards.html"
    assert result["uris"] == [uri, uri]
    assert uri in result["resources"]
    assert "<p>Hello reader</p>" in result["page"]


CASES: dict[tuple[str, int], Case] = {
    ("howto/add-to-a-site", 0): Case(
        SEED
        + """
result["pk"] = cities.pk
result["found"] = call("search_books", {"query": "invisible"})
result["tools"] = sorted(mcp.tools)
result["reserve"] = mcp.tools["reserve"].permission
result["resources"], result["prompts"] = sorted(mcp.resources), sorted(mcp.prompts)
result["methods"] = sorted(mcp.methods)
""",
        installed,
    ),
    ("howto/observability", 0): Case(
        """
import logging
from django.conf import settings
from django.test import Client
logging.getLogger("library").info("hello from the guide")
metrics = Client(HTTP_HOST="localhost")
result["metrics"] = {
    "with the token": metrics.get("/metrics", headers={"Authorization": "Bearer s3cret"}).status_code,
    "without": metrics.get("/metrics").status_code,
}
result["settings"] = sorted(settings.MCP_SERVER)
""",
        observed,
        env={"METRICS_TOKEN": "s3cret"},
    ),
    ("howto/expose-models", 0): Case(
        SEED
        + """
result["tools"] = sorted(mcp.tools)
result["listed"] = call("books_list", {"author__name": "Italo Calvino", "order_by": "-year"})
""",
        reads,
    ),
    ("howto/expose-models", 1): Case(
        SEED
        + """
result["tools"] = sorted(mcp.tools)
editor = User.objects.create_user("editor")
book = {"title": "If on a Winter's Night", "author": calvino.pk, "year": 1978, "isbn": "978-0156439619"}
result["created"] = call("books_create", book, editor)
result["updated"] = call("books_update", {"isbn": "978-0156439619", "year": 1979}, editor)
result["deleted"] = call("books_delete", {"isbn": "978-0156439619"}, editor)
""",
        writes,
    ),
    ("howto/expose-models", 2): Case(
        """
from django.contrib.auth.models import User
from library.models import Author, Book
alice, bob = User.objects.create_user("alice"), User.objects.create_user("bob")
theirs = Author.objects.create(name="Alice's author", owner=alice)
own = Author.objects.create(name="Bob's author", owner=bob)
book = {"title": "A", "year": 2000, "isbn": "1"}
result["theirs"], result["own"] = theirs.pk, own.pk
result["refused"] = call("book_create", {**book, "author": theirs.pk}, bob)
mine = Book.objects.create(title="B", year=2001, isbn="2", author=own, owner=bob)
result["moved"] = call("book_update", {"id": mine.pk, "author": theirs.pk}, bob)
result["kept"] = call("book_update", {"id": mine.pk, "title": "B, again"}, bob)
result["outside"] = call("book_create", {**book, "author": own.pk}, bob)  # owner unset: not bob's rows
""",
        bounded,
    ),
    ("howto/expose-forms", 0): Case(
        SEED
        + """
reader = User.objects.create_user("reader")
result["permissions"] = [mcp.tools[name].permission for name in ("author_add", "loan_request")]
loan = {"borrower": "reader", "book": cities.pk, "weeks": 2, "where": "home"}
result["lent"] = call("loan_request", loan, reader)
result["too_long"] = call("loan_request", {**loan, "weeks": 9}, reader)
result["author"] = call("author_add", {"name": "Primo Levi"}, reader)
""",
        forms,
    ),
    ("howto/rate-limits", 0): Case(
        """
from django.conf import settings
result["settings"] = sorted(settings.MCP_SERVER)
add = {"name": "add", "arguments": {"a": 1, "b": 1}}
answers = [post("tools/call", add, name="add") for _ in range(31)]  # anonymous, from one address
result["served"] = sum(1 for answer in answers if "result" in answer)
result["refused"] = answers[-1]["error"]
""",
        limited,
    ),
    ("howto/tasks", 0): Case(
        """
tools = [mcp.tools["render_report"], mcp.tools["delete_archive"]]
result["tools"] = {tool.name: [tool.task, tool.task_start] for tool in tools}
result["discover"] = post("server/discover")
delete = {"name": "delete_archive", "arguments": {"name": "2019"}}  # without the tasks extension
result["required"] = post("tools/call", delete, name="delete_archive")
""",
        tasks,
    ),
    ("howto/several-servers", 0): Case(
        """
from mysite.mcp_servers import staff
result["staff"], result["default"] = sorted(staff.tools), sorted(mcp.tools)
result["staff_discover"] = post("server/discover", path="/staff/mcp")
result["default_discover"] = post("server/discover")
""".replace("mysite", SITE),
        several,
    ),
    ("howto/middleware", 0): Case(
        """
import logging
logging.basicConfig(level=logging.INFO)
result["added"] = post("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}}, name="add")
""",
        timed,
    ),
    ("howto/ask-the-client", 0): Case(
        """
every = {"elicitation": {}, "sampling": {}, "roots": {}}
trip = {"name": "plan_trip", "arguments": {}}
result["asked"] = post("tools/call", trip, name="plan_trip", capabilities=every)
""",
        asked,
    ),
    ("howto/apps", 0): Case(
        """
from django.contrib.auth.models import User
from django.template.loader import render_to_string
result["server"] = post("server/discover")["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"]
uris = [mcp.tools[n].definition()["_meta"]["ui"]["resourceUri"] for n in ("search_books", "reserve_copy")]
result["uris"], result["resources"] = uris, sorted(mcp.resources)
result["page"] = render_to_string("library/book_cards.html", {"user": User(username="reader")})
""",
        apps,
    ),
}
"""Each site a guide's blocks make (``variants``), and what it must show; ``stdio`` runs its client below."""

PAGES = sorted({page for page, _variant in CASES} | {"howto/stdio"})


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_library_site(tmp_path_factory.mktemp("guides") / "base")


def test_every_site_of_these_guides_has_a_case() -> None:
    made = {(page, index) for page in PAGES if page != "howto/stdio" for index in range(len(variants(page)))}
    assert made == set(CASES)
    assert len(variants("howto/expose-models")) == 3  # three versions of library/mcp.py: three sites


@pytest.mark.parametrize(("page", "index"), sorted(CASES), ids=lambda value: str(value))
def test_the_guides_blocks_run_as_the_page_says(base: Path, page: str, index: int, tmp_path: Path) -> None:
    case = CASES[(page, index)]
    site = copy_site(base, tmp_path / "site")
    place_blocks(site, variants(page)[index])
    if page == "howto/apps":  # the page's template, where its first step puts it
        (site / "library" / "templates" / "library").mkdir(parents=True)
        (site / "library" / "templates" / "library" / "book_cards.html").write_text(
            doc_fences(page, "html")[0]
        )
    found, stderr = probe(site, case.probe, case.env)
    assert found["checks"] == list(case.checks), stderr
    case.expect(found["result"], stderr)


def test_the_stdio_client_lists_the_sites_tools(base: Path, tmp_path: Path) -> None:
    """The page's client, with the site's Python, directory and settings for its ``/srv/library`` ones."""
    [(name, script)] = variants("howto/stdio")[0]
    site = copy_site(base, tmp_path / "site")
    env = {
        "DJANGO_SETTINGS_MODULE": f"{SITE}.settings",
        **{k: v for k, v in site_env(site).items() if k == "PYTHONPATH"},
    }
    here = (
        script.replace('"/srv/library/.venv/bin/python"', repr(sys.executable))
        .replace('"/srv/library"', repr(str(site)))
        .replace('{"DJANGO_SETTINGS_MODULE": "project.settings"}', repr(env))
    )
    assert "/srv/library" not in here
    assert "project.settings" not in here
    (site / name).write_text(here)
    done = subprocess.run(
        [sys.executable, name], cwd=site, env=site_env(site), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert ast.literal_eval(done.stdout.strip()) == ["add"]  # anonymous: whoami is for staff only
