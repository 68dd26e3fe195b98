"""Unit tests: token scopes, challenges, the token model, system checks, routing, models-as-tools errors."""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

import pytest
from channels.routing import ProtocolTypeRouter, URLRouter
from django.contrib.auth import get_user_model
from django.core.checks import CheckMessage
from django.core.exceptions import ImproperlyConfigured
from django.core.handlers.asgi import ASGIRequest
from django.test import override_settings
from django.utils import timezone

from mcp_server import MCPServer
from mcp_server.auth import Unauthorized, authenticate_request
from mcp_server.auth.metadata import metadata_document, metadata_url
from mcp_server.auth.models import AccessToken, hash_token
from mcp_server.auth.oauth import insufficient_scope_challenge
from mcp_server.checks import check_asgi_routing, check_authentication, routed_servers
from mcp_server.expose.models import expose_model
from mcp_server.registry.access import (
    granted_scopes,
    missing_scopes,
    required_scope,
    scope_key,
    scopes_allow,
    token_scopes,
)
from mcp_server.routing import mcp_urlpatterns
from mcp_server.wire.errors import InsufficientScope
from project.catalogue.models import Book


def request(headers: dict[str, str] | None = None, scheme: str = "http") -> ASGIRequest:
    raw = [(k.lower().encode(), v.encode()) for k, v in {"host": "testserver", **(headers or {})}.items()]
    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": raw, "scheme": scheme}
    return ASGIRequest(scope, io.BytesIO())


def ids(messages: list[CheckMessage]) -> list[str]:
    return [str(m.id) for m in messages]


# -- scopes ------------------------------------------------------------------------------------------------


def test_scope_matching() -> None:
    server = MCPServer("scopes")

    @server.tool
    def books_list() -> str:
        return ""

    @server.resource("library://books/{pk}")
    def book(pk: int) -> str:
        return ""

    tool, resource = server.tools["books_list"], server.resources["library://books/{pk}"]
    assert scope_key(tool) == "tool:books_list"
    assert scope_key(resource) == "resource:library://books/{pk}"
    assert scopes_allow(None, "tool:anything")
    assert scopes_allow(["tool:books_*"], "tool:books_list")
    assert not scopes_allow(["tool:books_*"], "tool:loans_list")
    assert scopes_allow(["resource:library://*"], scope_key(resource))

    class Token:
        scopes: Any = "tool:a tool:b"

    assert token_scopes(Token()) == ["tool:a", "tool:b"]
    Token.scopes = []
    assert token_scopes(Token()) is None
    assert token_scopes(None) is None


def test_the_scope_a_refused_call_names() -> None:
    server = MCPServer("step-up")

    @server.tool
    def books_list() -> str:
        return ""

    @server.resource("library://shelf[1]")
    def shelf() -> str:
        return ""

    @server.resource('library://say "hi"')
    def quoted() -> str:
        return ""

    tool = server.tools["books_list"]
    assert required_scope(tool) == "tool:books_list"
    # a key that would not match itself as a pattern, or that a challenge cannot carry: everything
    assert required_scope(server.resources["library://shelf[1]"]) == "mcp"
    assert required_scope(server.resources['library://say "hi"']) == "mcp"

    class Token:
        scopes: Any = ["tool:echo", "-", 'tool:"x"']

    assert missing_scopes(tool, Token()) == ["tool:books_list"]
    assert missing_scopes(tool, None) is None
    assert granted_scopes(Token()) == ["tool:echo"]  # what a challenge cannot repeat is left out
    refusal = InsufficientScope(["tool:books_list"], ["tool:echo", "tool:books_list"], "the tool")
    assert refusal.scope == "tool:echo tool:books_list"  # each scope once, granted ones first
    assert refusal.code == -32005


def test_the_insufficient_scope_challenge_cannot_carry_a_header_break() -> None:
    value = insufficient_scope_challenge(None, "/mcp", "tool:x", 'bad "uri"\r\nSet-Cookie: a=b' + "x" * 300)
    assert value.startswith('Bearer error="insufficient_scope", scope="tool:x", error_description="bad ')
    assert "\r" not in value
    assert "\n" not in value
    assert value.count('"') == 6
    assert len(value) < 300
    forged = insufficient_scope_challenge(None, "/mcp", 'tool:a "\r\nX: y tool:b', "d")
    assert forged == 'Bearer error="insufficient_scope", scope="tool:a X: y tool:b", error_description="d"'


# -- authentication and challenges -------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_token_model_and_authentication() -> None:
    user = await get_user_model().objects.acreate(username="tina")
    from asgiref.sync import sync_to_async

    token, plain = await sync_to_async(AccessToken.objects.create_token)(user, "t", scopes=["tool:x"])
    assert plain.startswith("mcp_")
    assert plain.startswith(token.prefix)
    assert token.key_hash == hash_token(plain)
    assert plain not in token.key_hash
    assert token.is_valid
    found, auth = await authenticate_request(request({"authorization": f"Bearer {plain}"}))
    assert found.username == "tina"
    assert auth.pk == token.pk
    refreshed = await AccessToken.objects.aget(pk=token.pk)
    assert refreshed.last_used is not None

    token.expires = timezone.now() - timedelta(seconds=1)
    await token.asave()
    with pytest.raises(Unauthorized) as refused:
        await authenticate_request(request({"authorization": f"Bearer {plain}"}))
    assert 'error="invalid_token"' in refused.value.challenges[0]


@pytest.mark.django_db(transaction=True)
async def test_the_token_lookup_reads_what_the_orm_reads_and_sees_changes_at_once() -> None:
    """``find_token`` builds the token and its user from one prepared query: every column equal to what the
    ORM's ``select_related`` reads (datetimes, the JSON scopes), and a revocation or a deactivated user is
    seen by the very next lookup (nothing is cached)."""
    from asgiref.sync import sync_to_async

    from mcp_server.auth.tokens import find_token

    user = await get_user_model().objects.acreate(username="lena", email="l@example.com")
    token, plain = await sync_to_async(AccessToken.objects.create_token)(
        user, "t", expires=timezone.now() + timedelta(days=1), scopes=["tool:x", "resource:library://*"]
    )
    expected = await AccessToken.objects.select_related("user").aget(pk=token.pk)
    found = await find_token(hash_token(plain))
    assert found is not None
    for field in AccessToken._meta.concrete_fields:
        assert getattr(found, field.attname) == getattr(expected, field.attname), field.name
    for field in get_user_model()._meta.concrete_fields:
        assert getattr(found.user, field.attname) == getattr(expected.user, field.attname), field.name
    assert found.scopes == ["tool:x", "resource:library://*"]
    assert found._state.adding is False
    assert await find_token(hash_token(plain + "x")) is None

    await get_user_model().objects.filter(pk=user.pk).aupdate(is_active=False)
    with pytest.raises(Unauthorized):
        await authenticate_request(request({"authorization": f"Bearer {plain}"}))
    await get_user_model().objects.filter(pk=user.pk).aupdate(is_active=True)
    await AccessToken.objects.filter(pk=token.pk).aupdate(revoked_at=timezone.now())
    with pytest.raises(Unauthorized):
        await authenticate_request(request({"authorization": f"Bearer {plain}"}))


async def test_anonymous_and_its_refusal() -> None:
    user, auth = await authenticate_request(request())
    assert not user.is_authenticated
    assert auth is None
    with override_settings(MCP_SERVER={"ALLOW_ANONYMOUS": False}), pytest.raises(Unauthorized) as refused:
        await authenticate_request(request())
    assert refused.value.challenges == ['Bearer realm="mcp"']


async def test_oauth_challenge_and_metadata_follow_the_request() -> None:
    config = {"ALLOW_ANONYMOUS": False, "OAUTH_AUTHORIZATION_SERVERS": ["https://issuer.example"]}
    with override_settings(MCP_SERVER=config, SECURE_PROXY_SSL_HEADER=("HTTP_X_FORWARDED_PROTO", "https")):
        proxied = request({"x-forwarded-proto": "https", "host": "mcp.example.org"})
        with pytest.raises(Unauthorized) as refused:
            await authenticate_request(proxied, resource_path="/tools/mcp")
        expected = "https://mcp.example.org/.well-known/oauth-protected-resource/tools/mcp"
        assert metadata_url(proxied, "/tools/mcp/") == expected
        assert refused.value.challenges == [f'Bearer realm="mcp", resource_metadata="{expected}"']
        document = metadata_document(proxied, "/tools/mcp", "Tools")
        assert document == {
            "resource": "https://mcp.example.org/tools/mcp",
            "authorization_servers": ["https://issuer.example"],
            "bearer_methods_supported": ["header"],
            "resource_name": "Tools",
        }


# -- system checks -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({}, []),
        ({"AUTHENTICATION_CLASSES": ["no.such.Class"]}, ["mcp_server.E007"]),
        ({"AUTHENTICATION_CLASSES": ["django.contrib.auth.models.User"]}, ["mcp_server.E007"]),
        ({"AUTHENTICATION_CLASSES": "mcp_server.auth.tokens.TokenAuthentication"}, ["mcp_server.E007"]),
        ({"AUTHENTICATION_CLASSES": ["rest_framework.authentication.TokenAuthentication"]}, []),
        ({"ALLOW_ANONYMOUS": "no"}, ["mcp_server.E008"]),
        ({"ALLOW_ANONYMOUS": False, "AUTHENTICATION_CLASSES": []}, ["mcp_server.W004"]),
        ({"ALLOW_ANONYMOUS": False, "OAUTH_AUTHORIZATION_SERVERS": ["https://issuer.example/tenant"]}, []),
        ({"ALLOW_ANONYMOUS": False, "OAUTH_AUTHORIZATION_SERVERS": ["http://127.0.0.1:9000"]}, []),
        (
            {"ALLOW_ANONYMOUS": False, "OAUTH_AUTHORIZATION_SERVERS": ["http://issuer.example"]},
            ["mcp_server.E009"],
        ),
        ({"ALLOW_ANONYMOUS": False, "OAUTH_AUTHORIZATION_SERVERS": ["issuer.example"]}, ["mcp_server.E009"]),
        ({"ALLOW_ANONYMOUS": False, "OAUTH_RESOURCE_METADATA": []}, ["mcp_server.E009"]),
        ({"OAUTH_AUTHORIZATION_SERVERS": ["https://issuer.example"]}, ["mcp_server.W005"]),
    ],
)
def test_authentication_checks(config: dict[str, Any], expected: list[str]) -> None:
    with override_settings(MCP_SERVER=config):
        assert ids(check_authentication()) == expected


def test_routing_check() -> None:
    assert check_asgi_routing() == []  # project.asgi.application routes /mcp and /staff/mcp
    with override_settings(ASGI_APPLICATION=None):
        assert ids(check_asgi_routing()) == ["mcp_server.W003"]
    with override_settings(ASGI_APPLICATION="no.such.application"):
        assert ids(check_asgi_routing()) == ["mcp_server.W003"]
    with override_settings(ASGI_APPLICATION="django.core.asgi.get_asgi_application"):
        assert ids(check_asgi_routing()) == ["mcp_server.W003"]


def test_routed_servers_are_found_through_routers_and_middleware() -> None:
    from channels.auth import AuthMiddlewareStack

    internal = MCPServer("internal-units")
    app = ProtocolTypeRouter(
        {"http": AuthMiddlewareStack(URLRouter(mcp_urlpatterns({"internal/mcp": internal})))}
    )
    assert routed_servers(app) == [internal]
    assert routed_servers(ProtocolTypeRouter({"http": URLRouter([])})) == []


def test_two_servers_with_one_key_cannot_be_routed() -> None:
    with pytest.raises(ImproperlyConfigured, match="the key 'twin'"):
        mcp_urlpatterns({"a/mcp": MCPServer("twin"), "b/mcp": MCPServer("twin")})
    shared = MCPServer("shared")
    assert len(mcp_urlpatterns({"a/mcp": shared, "b/mcp": shared})) == 4


# -- models as tools ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"fields": []}, "at least one field"),
        ({"fields": ["nope"]}, "no field 'nope'"),
        ({"fields": ["loans"]}, "to-many"),
        ({"fields": ["title__x"]}, "no relation"),
        ({"fields": ["title"], "filters": ["year"]}, "not on one of the exposed fields"),
        ({"fields": ["title"], "filters": ["title__regex"]}, "neither a supported lookup"),
        ({"fields": ["title"], "ordering": ["year"]}, "not an exposed field"),
        ({"fields": ["title"], "lookup": "title"}, "not a unique field"),
    ],
)
def test_expose_model_refuses_bad_configuration(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=message):
        expose_model(MCPServer("bad"), Book, **options)


def test_expose_model_schemas_and_permission() -> None:
    server = MCPServer("units")
    names = expose_model(
        server,
        Book,
        fields=["isbn", "title", "author"],
        filters=["author", "author__in", "title__isnull"],
        ordering=["title"],
        lookup="isbn",
        name="b",
        page_size=5,
    )
    assert names == ("b_list", "b_get")
    listing, getter = server.tools["b_list"], server.tools["b_get"]
    assert listing.permission == getter.permission == "catalogue.view_book"
    properties = listing.definition()["inputSchema"]["properties"]
    assert set(properties) == {"author", "author__in", "title__isnull", "order_by", "limit", "cursor"}
    assert properties["limit"]["maximum"] == 5
    assert properties["author__in"]["anyOf"][0] == {"items": {"type": "integer"}, "type": "array"}
    assert properties["title__isnull"]["anyOf"][0] == {"type": "boolean"}
    assert getter.definition()["inputSchema"]["required"] == ["isbn"]
    open_server = MCPServer("open")
    expose_model(open_server, Book, fields=["title"], permission=None)
    assert open_server.tools["book_list"].permission is None


# -- the admin ---------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_admin_shows_a_new_token_once_and_revokes_it(client: Any) -> None:
    from django.urls import reverse

    admin_user = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(admin_user)
    add_url = reverse("admin:mcp_server_accesstoken_add")
    form = client.get(add_url)
    assert form.status_code == 200
    assert b'name="expires_0"' in form.content  # a default expiry is offered
    response = client.post(
        add_url,
        {"user": admin_user.pk, "name": "laptop", "expires_0": "", "expires_1": "", "scopes": '["tool:*"]'},
    )
    assert response.status_code == 200, response.content
    token = AccessToken.objects.get(name="laptop")
    page = response.content.decode()
    plain = page.split('id="mcp-token-value"')[0].rsplit('value="', 1)[1].split('"', 1)[0]
    assert plain.startswith(token.prefix)
    assert hash_token(plain) == token.key_hash
    assert "no-store" in response["Cache-Control"]
    assert token.expires is None
    assert token.scopes == ["tool:*"]
    change = client.get(reverse("admin:mcp_server_accesstoken_change", args=[token.pk])).content.decode()
    assert plain not in change
    changelist = reverse("admin:mcp_server_accesstoken_changelist")
    client.post(changelist, {"action": "revoke", "_selected_action": [token.pk]})
    token.refresh_from_db()
    assert token.is_revoked
    assert "revoked" in client.get(changelist).content.decode()


@pytest.mark.django_db
def test_admin_lists_each_tokens_status_and_editing_keeps_its_secret(client: Any) -> None:
    from django.urls import reverse

    admin_user = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(admin_user)
    valid, valid_plain = AccessToken.objects.create_token(admin_user, "valid-one")
    AccessToken.objects.create_token(admin_user, "expired-one", expires=timezone.now() - timedelta(days=1))
    revoked, _ = AccessToken.objects.create_token(admin_user, "revoked-one")
    revoked.revoke()
    changelist = client.get(reverse("admin:mcp_server_accesstoken_changelist"))
    statuses = {
        token.name: changelist.context["cl"].model_admin.status(token)
        for token in changelist.context["cl"].result_list
    }
    assert statuses == {"valid-one": "valid", "expired-one": "expired", "revoked-one": "revoked"}

    change_url = reverse("admin:mcp_server_accesstoken_change", args=[valid.pk])
    edited = client.post(change_url, {"name": "renamed", "expires_0": "", "expires_1": "", "scopes": "[]"})
    assert edited.status_code == 302, edited.content  # the usual redirect: no secret page on a change
    valid.refresh_from_db()
    assert valid.name == "renamed"
    assert valid.key_hash == hash_token(valid_plain)  # a change does not mint a new secret
    assert valid_plain.startswith(valid.prefix)
    assert valid.user == admin_user


# -- session cookies and DRF, in process --------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_session_cookie_without_the_channels_auth_middleware() -> None:
    """Outside ``mcp_endpoint`` nobody has put a user in the scope: the cookie's session is loaded here."""
    from asgiref.sync import sync_to_async
    from django.test import Client

    from mcp_server.auth.session import SessionAuthentication

    user = await get_user_model().objects.acreate(username="cookie-user")
    browser = Client()
    await sync_to_async(browser.force_login)(user)
    cookie = f"sessionid={browser.cookies['sessionid'].value}"
    found, auth = await authenticate_request(request({"cookie": cookie}))
    assert (found.pk, auth) == (user.pk, None)
    unknown = request({"cookie": "sessionid=no-such-session"})
    assert await SessionAuthentication().authenticate(unknown) is None
    user.is_active = False
    await user.asave()
    assert await SessionAuthentication().authenticate(request({"cookie": cookie})) is None
    in_scope = request()
    in_scope.scope["user"] = user  # as the middleware would put it: deactivated users are refused too
    assert await SessionAuthentication().authenticate(in_scope) is None


def test_without_drf_a_foreign_class_is_refused_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from rest_framework.authentication import TokenAuthentication

    from mcp_server.auth import load_authenticator
    from mcp_server.auth.drf import DRFAuthentication, is_drf_authentication

    assert is_drf_authentication(TokenAuthentication)
    assert not is_drf_authentication(TokenAuthentication())  # an instance is not a class
    wrapped = load_authenticator("rest_framework.authentication.TokenAuthentication")
    assert isinstance(wrapped, DRFAuthentication)
    assert repr(wrapped) == "<DRFAuthentication TokenAuthentication>"
    monkeypatch.setitem(sys.modules, "rest_framework.authentication", None)  # as if DRF were not installed
    assert not is_drf_authentication(TokenAuthentication)
    with pytest.raises(ImproperlyConfigured, match=r"is neither an .* nor a DRF authentication class"):
        load_authenticator("django.contrib.auth.models.User")
