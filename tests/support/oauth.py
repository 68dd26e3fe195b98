"""The site as its own authorization server, live: a server with it on, a person's browser, PKCE values."""

from __future__ import annotations

import base64
import hashlib
import html
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from tests.support.auth import shell
from tests.support.live import LiveServer, start_server

ON = {"MCP_DEMO_OAUTH": "1"}
"""The environment that turns the demo's authorization server on (project/settings.py)."""

PASSWORD = "pw-for-oauth-tests"


def start_oauth_server(directory: Path, overrides: dict[str, Any] | None = None, **env: str) -> LiveServer:
    """A live test site with the authorization server on, and users ``alice`` (active) and ``gone``."""
    server = start_server(directory, overrides, name=f"oauth{secrets.token_hex(2)}", **{**ON, **env})
    make_user(server, "alice")
    return server


def make_user(server: LiveServer, name: str, **fields: Any) -> None:
    """Create (or reset) user ``name`` with :data:`PASSWORD` in the server's database."""
    code = (
        "from django.contrib.auth import get_user_model as g;"
        f"u, _ = g().objects.get_or_create(username={name!r});"
        f"u.set_password({PASSWORD!r});" + "".join(f"u.{k} = {v!r};" for k, v in fields.items()) + "u.save()"
    )
    shell(server, code)


def pkce() -> tuple[str, str]:
    """``(verifier, S256 challenge)``."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


def hidden_fields(page: str) -> dict[str, str]:
    """The hidden inputs of the consent form."""
    fields = {}
    for tag in re.findall(r"<input[^>]*>", page):
        if 'type="hidden"' in tag:
            name = re.search(r'name="([^"]*)"', tag)
            value = re.search(r'value="([^"]*)"', tag)
            if name:
                fields[name.group(1)] = html.unescape(value.group(1)) if value else ""
    return fields


@dataclass
class Browser:
    """A person's browser: signs in to the site with a session, reads and answers the consent page."""

    server: LiveServer
    http: httpx.AsyncClient

    @classmethod
    def open(cls, server: LiveServer) -> Browser:
        return cls(server, httpx.AsyncClient(base_url=server.base, timeout=30, follow_redirects=False))

    async def login(self, username: str = "alice", password: str = PASSWORD) -> None:
        page = await self.http.get("/accounts/login/")
        token = self.http.cookies["csrftoken"]
        done = await self.http.post(
            "/accounts/login/",
            data={"username": username, "password": password, "csrfmiddlewaretoken": token, "next": "/"},
        )
        assert done.status_code == 302, page.text

    async def consent_page(self, authorize_url: str) -> httpx.Response:
        return await self.http.get(authorize_url)

    async def answer(self, page: httpx.Response, *, allow: bool, **tamper: str) -> httpx.Response:
        """Post the consent form of ``page`` (Allow or Deny), with some hidden fields changed."""
        data = {**hidden_fields(page.text), **tamper}
        if allow:
            data["allow"] = "Allow"
        return await self.http.post(str(page.url), data=data, headers={"Referer": str(page.url)})

    async def authorize(self, authorize_url: str, *, allow: bool = True) -> dict[str, str]:
        """Consent to ``authorize_url``; the query of the redirect back to the client."""
        page = await self.consent_page(authorize_url)
        assert page.status_code == 200, page.text
        answered = await self.answer(page, allow=allow)
        assert answered.status_code == 302, answered.text
        return redirect_params(answered)

    async def close(self) -> None:
        await self.http.aclose()


def redirect_params(response: httpx.Response) -> dict[str, str]:
    """The query parameters of a redirect's ``Location``."""
    location = response.headers["location"]
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
