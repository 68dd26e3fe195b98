"""``expose_viewset`` in process: the schemas from DRF's mapping, the refusal messages, the configuration
errors, calls without an HTTP request (stdio), and DRF staying an optional extra."""

from __future__ import annotations

import datetime
import decimal
import json
import subprocess
import sys
import textwrap
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # installed with mcp, no stubs
import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.utils.encoders import JSONEncoder

from mcp_server.core.context import Context, SessionState
from mcp_server.expose.viewsets import expose_viewset
from mcp_server.expose.viewsets.errors import field_errors, refusal_message
from mcp_server.expose.viewsets.schema import input_schema, output_schema, to_json_schema
from mcp_server.registry.server import MCPServer
from mcp_server.wire.errors import RequestSettled
from project.catalogue.models import Author, Book
from tests.drfapp.api import AuthorSerializer, AuthorViewSet, LoanViewSet, ShelfViewSet
from tests.support.live import ROOT


class Part(serializers.Serializer):  # type: ignore[misc]
    label = serializers.CharField(max_length=5)


class Everything(serializers.Serializer):  # type: ignore[misc]
    """Fields whose DRF mapping needs converting to JSON Schema 2020-12."""

    id = serializers.IntegerField(read_only=True)
    price = serializers.DecimalField(max_digits=6, decimal_places=2, default=decimal.Decimal("1.50"))
    ratio = serializers.DecimalField(max_digits=4, decimal_places=2, coerce_to_string=False)
    note = serializers.CharField(allow_null=True, required=False)
    state = serializers.ChoiceField(choices=["open", "shut"], allow_null=True, allow_blank=True)
    when = serializers.DateTimeField()
    day = serializers.DateField(allow_null=True)
    code = serializers.RegexField(r"^[A-Z]+\Z", max_length=8)
    secret = serializers.CharField(write_only=True)
    parts = Part(many=True)
    extra = serializers.SerializerMethodField()
    blob = serializers.JSONField(required=False)

    def get_extra(self, obj: Any) -> Any:
        return [1, "two"]


def test_openapi_specifics_become_json_schema() -> None:
    schema = input_schema(Everything())
    props = schema["properties"]
    assert "id" not in props  # read-only
    assert "extra" not in props
    assert props["note"]["type"] == ["string", "null"]
    assert props["state"]["enum"] == ["open", "shut", "", None]
    assert props["day"] == {"type": ["string", "null"], "format": "date"}
    assert props["price"]["default"] == "1.50"  # a Decimal default, as the field represents it
    assert "multipleOf" not in props["ratio"]
    assert props["code"]["pattern"] == "^[A-Z]+$"
    assert props["parts"]["items"]["properties"]["label"]["maxLength"] == 5
    assert set(schema["required"]) == {"ratio", "state", "when", "day", "code", "secret", "parts"}
    jsonschema.Draft202012Validator.check_schema(schema)
    valid = {
        "ratio": 1.5,
        "state": None,
        "when": "2026-01-02T03:04:05Z",
        "day": None,
        "code": "AB",
        "secret": "s",
        "parts": [{"label": "a"}],
    }
    jsonschema.validate(valid, schema)
    with pytest.raises(jsonschema.ValidationError, match="'ajar' is not one of"):
        jsonschema.validate({**valid, "state": "ajar"}, schema)
    with pytest.raises(jsonschema.ValidationError, match="does not match"):
        jsonschema.validate({**valid, "code": "ab"}, schema)
    assert to_json_schema({"type": "string", "nullable": True, "example": "x"}) == {
        "type": ["string", "null"]
    }


def test_output_schemas_fit_what_the_serializer_gives() -> None:
    schema = output_schema(Everything())
    assert "secret" not in schema["properties"]  # write-only
    assert schema["properties"]["extra"] == {"readOnly": True}  # a method's value: anything
    instance = {
        "id": 3,
        "price": decimal.Decimal("12.34"),
        "ratio": decimal.Decimal("0.07"),
        "note": None,
        "state": "",
        "when": datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
        "day": None,
        "code": "AB",
        "secret": "s",
        "parts": [{"label": "a"}],
        "blob": {"any": ["thing"]},
    }
    given = json.loads(json.dumps(Everything(instance).data, cls=JSONEncoder))
    assert given["price"] == "12.34"
    assert given["ratio"] == 0.07
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(given, schema)
    assert set(schema["required"]) == set(given)


def test_the_listed_tools_of_the_test_viewsets() -> None:
    from mcp_server import mcp

    listed = {name: tool.definition() for name, tool in mcp.tools.items() if name.startswith("drf_")}
    assert set(listed) == {
        *(f"drf_books_{a}" for a in ("list", "retrieve", "create", "update", "partial_update", "destroy")),
        "drf_books_restock",
        "drf_books_withdraw",
        *(f"drf_loans_{a}" for a in ("list", "retrieve", "create", "update", "partial_update", "destroy")),
        "drf_authors_list",
        "drf_authors_retrieve",
    }
    loans = listed["drf_loans_list"]
    assert set(loans["inputSchema"]["properties"]) == {"cursor"}  # CursorPagination
    assert "count" not in loans["outputSchema"]["properties"]
    assert listed["drf_authors_list"]["outputSchema"]["required"] == ["items"]  # no paginator
    update = listed["drf_books_partial_update"]["inputSchema"]
    assert update["required"] == ["pk"]  # partial: only the lookup
    assert update["additionalProperties"] is False
    restock = listed["drf_books_restock"]
    assert restock["inputSchema"]["required"] == ["pk", "copies"]  # the action's own serializer
    assert "outputSchema" not in restock
    assert restock["description"] == "Add copies of a book to the shelf."
    # without a serializer_class of its own, an action may read none of the viewset's fields: none required
    withdraw = listed["drf_books_withdraw"]["inputSchema"]
    assert withdraw["required"] == ["pk"]
    assert {"title", "author", "year", "isbn"} <= set(withdraw["properties"])
    assert "additionalProperties" not in withdraw
    assert listed["drf_books_destroy"]["outputSchema"]["properties"]["deleted"] == {"type": "integer"}
    for definition in listed.values():
        jsonschema.Draft202012Validator.check_schema(definition["inputSchema"])
        jsonschema.Draft202012Validator.check_schema(definition.get("outputSchema", {}))


def test_options_choose_actions_and_override_descriptions_annotations_and_permissions() -> None:
    server = MCPServer("viewset-options")
    names = expose_viewset(
        server,
        ShelfViewSet,
        name="shelf",
        actions=["list", "restock"],
        descriptions={"list": "Every book."},
        annotations={"restock": {"idempotentHint": False, "destructiveHint": False}},
        permission={"restock": "catalogue.change_book"},
    )
    assert names == ("shelf_list", "shelf_restock")
    assert server.tools["shelf_list"].description == "Every book."
    assert server.tools["shelf_list"].permission is None
    assert server.tools["shelf_restock"].permission == "catalogue.change_book"
    assert server.tools["shelf_restock"].annotations == {
        "readOnlyHint": False,
        "idempotentHint": False,
        "destructiveHint": False,
    }
    with pytest.raises(ImproperlyConfigured, match="no action 'publish'"):
        expose_viewset(server, ShelfViewSet, name="other", actions=["publish"])
    with pytest.raises(TypeError, match="GenericViewSet"):
        expose_viewset(server, viewsets.ViewSet, name="plain")


def test_refusal_messages_name_each_field() -> None:
    errors = {
        "title": ["This field is required."],
        "author": {"name": ["Start with a capital.", "Too short."]},
        "parts": [{}, {"label": ["Too long."]}],
        "non_field_errors": ["Nope."],
    }
    assert field_errors(errors) == [
        "title: This field is required.",
        "author.name: Start with a capital. Too short.",
        "parts.1.label: Too long.",
        "non_field_errors: Nope.",
    ]
    assert refusal_message(403, {"detail": "No."}) == "Permission denied: No."
    assert refusal_message(404, {"detail": "Gone."}) == "Not found: Gone."
    assert (
        refusal_message(429, {"detail": "Slow down."}, "12")
        == "Throttled: Slow down. Retry after 12 seconds."
    )
    assert refusal_message(405, {"detail": 'Method "PUT" not allowed.'}) == (
        'Refused (405): Method "PUT" not allowed.'
    )


def _context(user: Any) -> Context:
    """A Context as the stdio transport makes it: no HTTP request behind the call."""
    server = MCPServer("viewset-stdio")
    return Context(server, SessionState("s", "2025-11-25"), 1, "tools/call", {}, peer=None, user=user)


@pytest.mark.django_db(transaction=True)
def test_a_call_without_an_http_request() -> None:
    """stdio: the viewset gets a request from 127.0.0.1, the caller forced as its user."""
    server = MCPServer("viewset-stdio-calls")
    expose_viewset(server, AuthorViewSet, name="authors", actions=["retrieve"])
    expose_viewset(server, LoanViewSet, name="loans", actions=["create"])
    editor = get_user_model().objects.create(username="stdio-user")
    author = Author.objects.create(name="Stdio Author")
    book = Book.objects.create(title="Via stdio", author=author, year=2000, isbn="S-1")
    one = async_to_sync(server.tools["authors_retrieve"].call)({"pk": author.pk}, _context(editor))
    assert one["structuredContent"] == {"id": author.pk, "name": "Stdio Author"}
    made = async_to_sync(server.tools["loans_create"].call)({"book": book.pk}, _context(editor))
    assert made["structuredContent"]["borrower"] == "stdio-user"
    anonymous = async_to_sync(server.tools["loans_create"].call)({"book": book.pk}, _context(AnonymousUser()))
    assert anonymous["isError"] is True
    assert anonymous["content"][0]["text"] == (
        "Permission denied: Authentication credentials were not provided."
    )
    assert book.loans.count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_paginated_list_without_an_http_request_links_on_an_allowed_host(settings: Any) -> None:
    """stdio with DEBUG off: the paginator's links are built on a host ``ALLOWED_HOSTS`` accepts (Django
    refuses any other with ``DisallowedHost``)."""
    settings.DEBUG = False
    settings.ALLOWED_HOSTS = [".library.example", "other.example"]
    server = MCPServer("viewset-stdio-pages")
    expose_viewset(server, ShelfViewSet, name="shelf", actions=["list"])
    author = Author.objects.create(name="Paged Author")
    for n in range(4):  # ShelfPages holds 3
        Book.objects.create(title=f"Paged {n}", author=author, year=2000, isbn=f"P-{n}")
    reader = get_user_model().objects.create(username="stdio-reader")
    page = async_to_sync(server.tools["shelf_list"].call)({"search": "Paged"}, _context(reader))
    assert not page.get("isError"), page
    assert page["structuredContent"]["count"] == 4
    assert page["structuredContent"]["next"].startswith("http://library.example/")


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True, check=False
    )


def test_the_core_never_imports_drf() -> None:
    done = _run(
        """
        import sys
        import django
        from django.conf import settings

        settings.configure(
            INSTALLED_APPS=["django.contrib.auth", "django.contrib.contenttypes", "mcp_server"],
            DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        )
        django.setup()
        import mcp_server
        import mcp_server.registry.server, mcp_server.protocol.dispatcher, mcp_server.transports.post
        import mcp_server.runtime, mcp_server.expose.models, mcp_server.expose.forms, mcp_server.routing
        from mcp_server import mcp, expose_model, Context
        print(sorted(name for name in sys.modules if name.startswith("rest_framework")))
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_without_drf_expose_viewset_says_what_to_install() -> None:
    done = _run(
        """
        import sys
        sys.modules["rest_framework"] = None  # as if Django REST framework were not installed
        import mcp_server
        from django.core.exceptions import ImproperlyConfigured
        try:
            mcp_server.expose_viewset
        except ImproperlyConfigured as exc:
            print(exc)
        """
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'django-mcp-ledger[drf]'" in done.stdout


class BookByIsbn(serializers.ModelSerializer):  # type: ignore[misc]
    class Meta:
        model = Book
        fields = ["title", "isbn", "year", "author"]


class BooksByIsbn(viewsets.ModelViewSet):  # type: ignore[misc]
    """Found by ISBN, a field the serializer also writes; the serializer depends on the user."""

    queryset = Book.objects.all()
    lookup_field = "isbn"

    def get_serializer_class(self) -> Any:
        self.request.user.get_username()  # reads the request's user, as some viewsets do: never None here
        return BookByIsbn


@pytest.mark.django_db(transaction=True)
def test_a_lookup_the_serializer_also_writes() -> None:
    server = MCPServer("viewset-isbn")
    names = expose_viewset(server, BooksByIsbn, name="isbn_books", actions=["list", "update"])
    update = server.tools["isbn_books_update"].definition()["inputSchema"]
    assert update["properties"]["isbn"] == {"type": "string", "maxLength": 20}  # the serializer's field
    assert update["required"] == ["isbn", "title", "year", "author"]
    assert "page" not in (server.tools[names[0]].description or "")  # no paginator
    author = Author.objects.create(name="Isbn Author")
    Book.objects.create(title="Old", author=author, year=2000, isbn="S-2")
    user = get_user_model().objects.create(username="isbn-user")
    arguments = {"isbn": "S-2", "title": "New", "year": 2001, "author": author.pk}
    done = async_to_sync(server.tools["isbn_books_update"].call)(arguments, _context(user))
    assert done["structuredContent"] == {"title": "New", "isbn": "S-2", "year": 2001, "author": author.pk}
    assert Book.objects.get(isbn="S-2").title == "New"


def test_a_paginated_list_says_which_arguments_page() -> None:
    from mcp_server import mcp

    assert "`page` value(s) of its `next` link" in (mcp.tools["drf_books_list"].description or "")
    assert "`cursor` value(s)" in (mcp.tools["drf_loans_list"].description or "")


class AuthorsWithCensus(mixins.CreateModelMixin, viewsets.GenericViewSet):  # type: ignore[misc]
    queryset = Author.objects.all()
    serializer_class = AuthorSerializer

    @action(detail=False, methods=["get", "post"])  # type: ignore[untyped-decorator]
    def census(self, request: Any) -> Response:
        """How many authors there are."""
        return Response({"authors": Author.objects.count(), "method": request.method})


class RecordingClaim:
    """An ``AnswerClaim`` that records when it is called, and settles the request first if told to."""

    def __init__(self, settled: bool = False) -> None:
        self.settled = settled
        self.calls: list[Any] = []

    async def reserve(self, using: str | None) -> None:
        self.calls.append(("reserve", using))

    def confirm(self, using: str) -> None:
        self.calls.append(("confirm", using, connections[using].in_atomic_block))
        if self.settled:
            raise RequestSettled("cancelled")


def _claiming(user: Any, claim: RecordingClaim) -> Context:
    ctx = _context(user)
    ctx.claim = claim
    return ctx


@pytest.mark.django_db(transaction=True)
def test_a_write_claims_the_answer_last_inside_its_transaction() -> None:
    server = MCPServer("viewset-claims")
    expose_viewset(server, AuthorsWithCensus, name="authors")
    create = server.tools["authors_create"]
    user = get_user_model().objects.create(username="claimer")

    claim = RecordingClaim()
    made = async_to_sync(create.call)({"name": "Claimed"}, _claiming(user, claim))
    assert made["structuredContent"]["name"] == "Claimed"
    assert claim.calls == [("reserve", "default"), ("confirm", "default", True)]  # inside the atomic block

    refused = RecordingClaim()
    bad = async_to_sync(create.call)({"name": "lower"}, _claiming(user, refused))
    assert bad["isError"] is True
    assert refused.calls == []  # a refusal claims nothing

    settled = RecordingClaim(settled=True)
    with pytest.raises(RequestSettled):
        async_to_sync(create.call)({"name": "Too Late"}, _claiming(user, settled))
    assert not Author.objects.filter(name="Too Late").exists()  # rolled back
    assert Author.objects.filter(name="Claimed").exists()

    reads = RecordingClaim()
    counted = async_to_sync(server.tools["authors_census"].call)({}, _claiming(user, reads))
    assert counted["structuredContent"] == {"authors": 1, "method": "GET"}  # the first method: GET
    assert reads.calls == []  # reads claim nothing


@pytest.mark.django_db(transaction=True)
def test_an_action_may_answer_to_another_of_its_methods() -> None:
    server = MCPServer("viewset-methods")
    expose_viewset(server, AuthorsWithCensus, name="authors", actions=["census"], methods={"census": "post"})
    census = server.tools["authors_census"]
    assert census.annotations == {"readOnlyHint": False}
    assert census.definition()["inputSchema"] == {  # it reads no body: the serializer's name is not required
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 200}},
    }
    claim = RecordingClaim()
    user = get_user_model().objects.create(username="poster")
    answer = async_to_sync(census.call)({}, _claiming(user, claim))
    assert answer["structuredContent"] == {"authors": 0, "method": "POST"}
    assert claim.calls == [("reserve", "default"), ("confirm", "default", True)]  # a POST action is a write
    with pytest.raises(ImproperlyConfigured, match="does not answer delete"):
        expose_viewset(server, AuthorsWithCensus, name="other", methods={"census": "delete"})
