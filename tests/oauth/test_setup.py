"""Turning the authorization server on: what ``import mcp_server`` loads, the system checks, the demo."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from django.test import override_settings

from mcp_server.oauth.checks import AUTH_CLASS, TOKEN_CLASS, check_oauth_server
from mcp_server.oauth.defaults import SAFE_DEFAULTS
from mcp_server.oauth.redirects import redirect_problem
from tests.support.live import ROOT, base_env, manage_py_check

GOOD_CLASSES = ["mcp_server.auth.session.SessionAuthentication", AUTH_CLASS, TOKEN_CLASS]


def ids(**overrides: Any) -> list[str]:
    base: dict[str, Any] = {
        "DEBUG": True,
        "LOGIN_URL": "/admin/login/",
        "OAUTH2_PROVIDER": dict(SAFE_DEFAULTS),
        "MCP_SERVER": {"ALLOW_ANONYMOUS": False, "AUTHENTICATION_CLASSES": GOOD_CLASSES},
    }
    with override_settings(**{**base, **overrides}):
        return sorted(str(m.id) for m in check_oauth_server())


def test_import_mcp_server_does_not_import_the_toolkit() -> None:
    code = (
        "import sys, django; django.setup(); import mcp_server, mcp_server.routing, mcp_server.auth;"
        "print('oauth2_provider' in sys.modules)"
    )
    env = base_env(ROOT / "unused.sqlite3", MCP_DEMO_OAUTH="0")
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "False", done.stderr


def test_a_good_configuration_passes() -> None:
    assert ids() == []


def test_each_check_fires() -> None:
    assert ids(MCP_SERVER={"ALLOW_ANONYMOUS": True, "AUTHENTICATION_CLASSES": GOOD_CLASSES}) == [
        "mcp_server.W060"
    ]
    assert ids(LOGIN_URL="/no/such/login/") == ["mcp_server.E060"]
    assert ids(LOGIN_URL="no-such-url-name") == ["mcp_server.E060"]
    assert ids(DEBUG=False) == ["mcp_server.W061"]
    assert ids(DEBUG=False, SECURE_PROXY_SSL_HEADER=("HTTP_X_FORWARDED_PROTO", "https")) == []
    assert ids(
        MCP_SERVER={"ALLOW_ANONYMOUS": False, "AUTHENTICATION_CLASSES": [TOKEN_CLASS, AUTH_CLASS]}
    ) == ["mcp_server.E062"]
    assert ids(MCP_SERVER={"ALLOW_ANONYMOUS": False, "AUTHENTICATION_CLASSES": [TOKEN_CLASS]}) == [
        "mcp_server.E062"
    ]


@pytest.mark.parametrize("value", [{"token": 0}, {"token": "60"}, {"tokens": 60}, [60], {"register": True}])
def test_a_bad_throttle_is_an_error(value: Any) -> None:
    mcp = {"ALLOW_ANONYMOUS": False, "AUTHENTICATION_CLASSES": GOOD_CLASSES}
    assert ids(MCP_SERVER={**mcp, "OAUTH_THROTTLE": value}) == ["mcp_server.E063"]
    assert ids(MCP_SERVER={**mcp, "OAUTH_THROTTLE": None}) == []


@pytest.mark.parametrize(
    "weak",
    [
        {"PKCE_REQUIRED": False},
        {"COMPLIANT_BCP_RFC9700_PKCE_METHOD": False},
        {"COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": False},
        {"ALLOWED_REDIRECT_URI_SCHEMES": ["https", "javascript"]},
        {"ALLOW_URI_WILDCARDS": True},
    ],
)
def test_weakening_the_toolkit_is_an_error(weak: dict[str, Any]) -> None:
    assert ids(OAUTH2_PROVIDER={**SAFE_DEFAULTS, **weak}) == ["mcp_server.E061"]


def test_the_demo_with_the_server_on_passes_manage_py_check(tmp_path: Any) -> None:
    env = base_env(tmp_path / "demo.sqlite3", DJANGO_SETTINGS_MODULE="project.settings", MCP_DEMO_OAUTH="1")
    done = manage_py_check(env)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("uri", "ok"),
    [
        ("https://claude.ai/api/mcp/auth_callback", True),
        ("http://127.0.0.1:33418", True),
        ("vscode://vscode.github-authentication/did-authenticate", True),
        ("http://example.com/cb", False),
        ("JavaScript:alert(1)", False),
        ("data:,x", False),
        ("https://a.example/cb#x", False),
        ("https://a.example/ cb", False),
        ("http://[::1", False),
        ("", False),
    ],
)
def test_redirect_uris(uri: str, ok: bool) -> None:
    with override_settings(OAUTH2_PROVIDER=SAFE_DEFAULTS):  # what the app config puts in place
        assert (redirect_problem(uri) is None) is ok


def test_the_endpoints_are_read_off_the_routing() -> None:
    from mcp_server import MCPServer, mcp
    from mcp_server.oauth.resources import _walk
    from mcp_server.routing import mcp_application

    async def django_app(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("not called")

    other = MCPServer("other-for-walk", key="other-for-walk", title="Other")
    one = mcp_application(django_app, servers={"only/mcp": mcp})
    assert [path for path, _server in _walk(one)] == ["/only/mcp", "/only/mcp"]
    two = mcp_application(django_app, servers={"mcp": mcp, "x/mcp": other})
    assert dict(_walk(two))["/x/mcp"] is other


MCP = {"ALLOW_ANONYMOUS": False, "AUTHENTICATION_CLASSES": GOOD_CLASSES}


@pytest.mark.parametrize(
    "cimd",
    [{"OAUTH_CIMD_HOSTS": "example.com"}, {"OAUTH_CIMD_HOSTS": [""]}, {"OAUTH_CIMD_PRIVATE_HOSTS": [3]}],
)
def test_bad_cimd_host_lists_are_an_error(cimd: dict[str, Any]) -> None:
    assert ids(MCP_SERVER={**MCP, **cimd}) == ["mcp_server.E066"]


def test_private_cimd_hosts_warn_outside_debug() -> None:
    private = {**MCP, "OAUTH_CIMD_HOSTS": ["clients.example"], "OAUTH_CIMD_PRIVATE_HOSTS": ["intranet"]}
    assert ids(MCP_SERVER=private) == []  # DEBUG: a test or a developer's machine
    assert ids(DEBUG=False, SECURE_SSL_REDIRECT=True, MCP_SERVER=private) == ["mcp_server.W066"]


@pytest.mark.parametrize(
    "weak",
    [
        {"CIMD_METADATA_FETCHER": "builtins.object"},
        {"CIMD_METADATA_FETCHER": "no.such.Fetcher"},
        {"CIMD_FETCH_TIMEOUT_SECONDS": 60},
        {"CIMD_MAX_DOCUMENT_SIZE": 10_000_000},
        {"CIMD_MAX_CONCURRENT_FETCHES": 0},
        {"CIMD_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.cimd.AllowAllCIMDPermission",)},
    ],
)
def test_weakening_cimd_is_a_warning(weak: dict[str, Any]) -> None:
    assert ids(OAUTH2_PROVIDER={**SAFE_DEFAULTS, **weak}) == ["mcp_server.W067"]
    assert ids(OAUTH2_PROVIDER={**SAFE_DEFAULTS, **weak, "CIMD_ENABLED": False}) == []


def test_server_icons_are_in_server_info_and_a_servers_own_win() -> None:
    from mcp_server import MCPServer
    from mcp_server.protocol.lifecycle import server_info

    site_icon = [{"src": "https://example.org/site.png"}]
    own_icon = [{"src": "https://example.org/own.png", "sizes": ["48x48"]}]
    with override_settings(MCP_SERVER={"SERVER_ICONS": site_icon}):
        assert server_info(MCPServer("plain-icons", key="plain-icons"))["icons"] == site_icon
        assert server_info(MCPServer("own-icons", key="own-icons", icons=own_icon))["icons"] == own_icon
    assert "icons" not in server_info(MCPServer("no-icons", key="no-icons"))
