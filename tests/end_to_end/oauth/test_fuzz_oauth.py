"""Property test of the authorization server's public endpoints: hypothesis sends what a hostile client
may (every grant type oauthlib and DOT know, near-miss and raw values, repeated and missing parameters,
bodies that are not the form or the JSON asked for) to the token, revocation and registration endpoints of
a live site, and a bearer token of any shape to the MCP endpoint.

Properties: the status is below 500, and an error is the RFC's JSON object (``error`` a string). The
device flow's grant, which DOT handles though this server does not offer it, answered a 500 before.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.hostile import strict_json
from tests.support.live import LiveServer
from tests.support.raw import ACCEPT_BOTH, LATEST, rpc
from tests.support.raw_oauth import REDIRECT

FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
GRANTS = [
    "authorization_code",
    "refresh_token",
    "client_credentials",
    "password",
    "implicit",
    "urn:ietf:params:oauth:grant-type:device_code",
    "urn:ietf:params:oauth:grant-type:jwt-bearer",
    "urn:ietf:params:oauth:grant-type:token-exchange",
    "openid",
]
TOKEN_PARAMETERS = [
    "grant_type",
    "code",
    "redirect_uri",
    "client_id",
    "client_secret",
    "code_verifier",
    "refresh_token",
    "device_code",
    "scope",
    "resource",
    "username",
    "password",
    "assertion",
    "subject_token",
]
near_misses = st.sampled_from(
    ["", " ", "\x00", "\ud800", "☃", "%", "%ff", "1e400", "a" * 3000, "mcp", "mcp openid", REDIRECT, "S256"]
)
values = st.one_of(near_misses, st.sampled_from(GRANTS), st.text(max_size=40))
hostile_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20), near_misses),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
    max_leaves=8,
)
REGISTRATION_FIELDS = [
    "redirect_uris",
    "client_name",
    "grant_types",
    "response_types",
    "token_endpoint_auth_method",
    "scope",
    "client_uri",
    "logo_uri",
    "contacts",
    "software_id",
    "application_type",
    "client_id",
]


def form(items: list[tuple[str, str]]) -> bytes:
    """``items`` as a form body, each text as UTF-8 (a lone surrogate as its three bytes, as a raw client
    could send it)."""
    return urlencode(items, encoding="utf-8", errors="surrogatepass").encode()


def check(response: httpx.Response) -> None:
    assert response.status_code < 500, (response.status_code, response.text[:500])
    if response.status_code >= 400 and response.headers.get("content-type", "").startswith(
        "application/json"
    ):
        answer = strict_json(response.content)
        assert isinstance(answer, dict), answer
        if answer.get("jsonrpc") == "2.0":  # the MCP endpoint's refusal
            assert isinstance(answer["error"]["code"], int), answer
        else:  # an OAuth error
            assert isinstance(answer["error"], str), answer


@pytest.fixture(scope="module")
def http(site: LiveServer) -> Any:
    with httpx.Client(base_url=site.base, timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def registered(http: httpx.Client) -> dict[str, Any]:
    done = http.post(
        "/oauth/register/", json={"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"}
    )
    assert done.status_code == 201, done.text
    return dict(done.json())


@FUZZ
@given(
    grant=st.one_of(st.sampled_from(GRANTS), values),
    others=st.lists(st.tuples(st.sampled_from(TOKEN_PARAMETERS), values), max_size=5),
    with_client=st.booleans(),
    basic=st.one_of(st.none(), st.sampled_from(["", "!!!", "Og==", "AA==", "w6k6w6k=", "YTpi"])),
)
def test_the_token_endpoint_never_answers_a_5xx(
    http: httpx.Client,
    registered: dict[str, Any],
    grant: str,
    others: list[tuple[str, str]],
    with_client: bool,
    basic: str | None,
) -> None:
    items = [("grant_type", grant), *others]
    if with_client:
        items.append(("client_id", registered["client_id"]))
    headers = {"content-type": "application/x-www-form-urlencoded"}
    if basic is not None:
        headers["authorization"] = f"Basic {basic}".strip()
    check(http.post("/oauth/token/", content=form(items), headers=headers))


def test_the_device_flow_is_not_offered(http: httpx.Client, registered: dict[str, Any]) -> None:
    """The grant that answered a 500 (DOT's device flow read a ``device_code`` the request did not have)."""
    for extra in ([], [("device_code", "x")]):
        items = [("grant_type", GRANTS[5]), ("client_id", registered["client_id"]), *extra]
        done = http.post(
            "/oauth/token/",
            content=form(items),
            headers={"content-type": "application/x-www-form-urlencoded"},
        )
        assert done.status_code == 400, done.text
        assert done.json()["error"] == "unsupported_grant_type"


@FUZZ
@given(
    token=values,
    others=st.lists(
        st.tuples(st.sampled_from(["token_type_hint", "client_id", "client_secret"]), values), max_size=3
    ),
)
def test_the_revocation_endpoint_never_answers_a_5xx(
    http: httpx.Client, token: str, others: list[tuple[str, str]]
) -> None:
    items = [("token", token), *others]
    check(
        http.post(
            "/oauth/revoke/",
            content=form(items),
            headers={"content-type": "application/x-www-form-urlencoded"},
        )
    )


@FUZZ
@given(
    fields=st.dictionaries(st.sampled_from(REGISTRATION_FIELDS), hostile_json, max_size=4),
    keep_redirect=st.booleans(),
    content_type=st.sampled_from(["application/json", "text/plain", "application/x-www-form-urlencoded"]),
)
def test_registration_never_answers_a_5xx(
    http: httpx.Client, fields: dict[str, Any], keep_redirect: bool, content_type: str
) -> None:
    body = {"redirect_uris": [REDIRECT], **fields} if keep_redirect else fields
    data = json.dumps(body).encode("utf-8", "surrogatepass")
    done = http.post("/oauth/register/", content=data, headers={"content-type": content_type})
    check(done)
    if done.status_code == 201:  # what was registered reads back as JSON
        assert strict_json(done.content)["client_id"]


@FUZZ
@given(
    scheme=st.sampled_from(["Bearer ", "bearer ", "Basic ", "", "Bearer  ", "DPoP "]),
    token=st.one_of(near_misses, st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=80)),
)
def test_a_bearer_token_of_any_shape_is_refused_with_a_401(
    http: httpx.Client, scheme: str, token: str
) -> None:
    value = (scheme + token).encode("utf-8", "surrogatepass")
    value = bytes(b for b in value if b == 9 or 0x20 <= b < 0x7F or b >= 0x80).strip()
    headers = [
        (b"authorization", value),
        (b"accept", ACCEPT_BOTH.encode()),
        (b"content-type", b"application/json"),
        (b"mcp-protocol-version", LATEST.encode()),
    ]
    done = http.post("/mcp", content=json.dumps(rpc("tools/list", None, 1)).encode(), headers=headers)
    check(done)
    assert done.status_code in (400, 401), done.text
    if done.status_code == 401:
        assert "resource_metadata=" in done.headers["www-authenticate"]
