"""MCP Apps views in the registry (``mcp_server.registry.apps``): what ``@mcp.tool(app=...)`` registers, what
it refuses, the CSP derived from the settings, and the system checks E080, E081 and W080."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.checks import run_checks
from django.test import override_settings

from mcp_server import App, MCPServer
from mcp_server.checks.apps import missing_templates
from mcp_server.registry.apps import AppResource, derived_csp
from mcp_server.wire.apps import APP_MIME_TYPE, client_supports_apps

pytestmark = pytest.mark.django_db


def _ids(**mcp: Any) -> list[str]:
    from django.conf import settings

    with override_settings(MCP_SERVER={**settings.MCP_SERVER, **mcp}):
        return sorted(str(m.id) for m in run_checks() if str(m.id).startswith("mcp_server.E08"))


def test_one_resource_per_view_however_many_tools_show_it() -> None:
    server = MCPServer("shop")
    view = App("shop/cart.html", prefers_border=True)

    @server.tool(app=view)
    def cart() -> str:
        return "cart"

    @server.tool(app=view, visibility=["app"])
    def add_to_cart(item: int) -> str:
        return "added"

    assert list(server.resources) == ["ui://shop/shop/cart.html"]
    resource = server.resources["ui://shop/shop/cart.html"]
    assert isinstance(resource, AppResource)
    assert resource.definition()["mimeType"] == APP_MIME_TYPE
    assert server.tools["cart"].definition()["_meta"] == {"ui": {"resourceUri": "ui://shop/shop/cart.html"}}
    assert not server.tools["cart"].app_only
    assert server.tools["add_to_cart"].app_only


def test_a_different_view_at_the_same_uri_is_refused() -> None:
    from django.core.exceptions import ImproperlyConfigured

    server = MCPServer("shop")
    server.tool(app="shop/cart.html")(lambda: "a")
    with pytest.raises(ImproperlyConfigured, match="already registered"):
        server.tool(app=App("shop/cart.html", prefers_border=False), name="other")(lambda: "b")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"visibility": ["agent"]}, "visibility must be"),
        ({"visibility": "app"}, "visibility must be"),
        ({"visibility": []}, "visibility must be"),
        ({"app": "v.html", "meta": {"ui": {}}}, "meta must not"),
    ],
)
def test_bad_views_are_refused_at_registration(options: dict[str, Any], message: str) -> None:
    with pytest.raises(TypeError, match=message):
        MCPServer("x").tool(name="t", **options)(lambda: "t")


def test_unknown_permissions_braces_and_bad_csp_are_refused() -> None:
    with pytest.raises(TypeError, match="unknown permissions"):
        App("v.html", permissions={"usb": {}})
    with pytest.raises(TypeError, match="braces"):
        App("v.html", name="cards/{id}")
    with pytest.raises(TypeError, match="csp must be"):
        App("v.html", csp={"scriptDomains": []})
    with pytest.raises(TypeError, match="list of origins"):
        App("v.html", csp={"resourceDomains": "https://cdn"})  # type: ignore[dict-item]


def test_the_csp_allows_the_static_and_media_origins() -> None:
    with override_settings(STATIC_URL="https://cdn.example/static/", MEDIA_URL="/media/"):
        assert derived_csp(None) == {"resourceDomains": ["https://cdn.example"]}  # stdio: no site origin
    with override_settings(
        STATIC_URL="/static/", MEDIA_URL="/media/", MCP_SERVER={"APP_ORIGIN": "https://library.example"}
    ):
        assert derived_csp(None) == {"resourceDomains": ["https://library.example"]}
    with override_settings(MCP_SERVER={"APP_CSP": {"connectDomains": ["https://api.example"]}}):
        assert derived_csp(None) == {"connectDomains": ["https://api.example"]}


def test_what_the_client_declared() -> None:
    ui = "io.modelcontextprotocol/ui"
    assert client_supports_apps({"extensions": {ui: {"mimeTypes": [APP_MIME_TYPE]}}})
    assert not client_supports_apps({"extensions": {ui: {}}})
    assert not client_supports_apps({"extensions": {ui: {"mimeTypes": ["text/html"]}}})
    assert not client_supports_apps({"extensions": []})
    assert not client_supports_apps({})


def test_e080_e081_bad_app_settings() -> None:
    assert _ids() == []
    assert _ids(APP_ORIGIN="https://library.example") == []
    assert _ids(APP_ORIGIN="library.example") == ["mcp_server.E080"]
    assert _ids(APP_ORIGIN="https://library.example/shop") == ["mcp_server.E080"]
    assert _ids(APP_CSP={"resourceDomains": ["https://cdn.example"]}) == []
    assert _ids(APP_CSP={"scripts": []}) == ["mcp_server.E081"]
    assert _ids(APP_CSP=["https://cdn.example"]) == ["mcp_server.E081"]


def test_w080_a_view_whose_template_is_missing() -> None:
    from mcp_server import mcp

    assert missing_templates(mcp) == []  # the demo's and the test app's views load
    server = MCPServer("x")
    server.tool(app="nowhere/missing.html")(lambda: "t")
    assert missing_templates(server) == [("ui://x/nowhere/missing.html", "nowhere/missing.html")]
