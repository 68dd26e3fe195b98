"""A credential that stops working ends the long-lived streams it opened: the handshake-era GET stream (it
closes) and the 2026-07-28 ``subscriptions/listen`` stream (answered with its ``complete`` result, as at
shutdown), and neither carries anything else after that.

Two paths, each on real servers: the periodic check (``STREAM_RECHECK_INTERVAL``; here 1 s, on a server
whose in-process channel layer no other process reaches, with changes that send no signal), and the
immediate one (the interval is an hour; a revocation through ``manage.py mcp_token revoke`` or the admin,
or a user deactivated, is announced over Redis to the worker holding the streams). Which streams a change
wakes, in this process: ``tests/protocol/test_credentials.py``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from tests.support.admin import admin_client, create_superuser, run_action
from tests.support.auth import bearer, http_client, make_fixtures, manage, shell
from tests.support.listen import Stream, listening, notify
from tests.support.live import LiveServer, run_manage, run_shell, shared_site, start_server
from tests.support.raw import open_session, sse_events

pytestmark = pytest.mark.asyncio

ENDS_WITHIN = 15.0
"""Seconds a stream may take to end after its credential stopped working (far below the hour of the
immediate-path servers; the periodic server checks every second)."""

NEW_CREDENTIAL = """
import json
from django.contrib.auth import get_user_model
from mcp_server.auth.models import AccessToken
user, _ = get_user_model().objects.get_or_create(username={username!r})
token, plain = AccessToken.objects.create_token(user, "stream")
print(json.dumps([plain, token.pk]))
"""

QUIET_CHANGES = {  # bulk updates: no signal, so only the periodic check can notice them
    "expired": "AccessToken.objects.filter(pk={pk}).update(expires=timezone.now())",
    "user deactivated": "get_user_model().objects.filter(username={username!r}).update(is_active=False)",
}

QUIET_PRELUDE = """
from django.contrib.auth import get_user_model
from django.utils import timezone
from mcp_server.auth.models import AccessToken
"""

DEACTIVATE = """
from django.contrib.auth import get_user_model
user = get_user_model().objects.get(username={username!r})
user.is_active = False
user.save()
"""


def new_credential(server: LiveServer, username: str) -> tuple[str, int]:
    """A user of that name (made if need be) and a new token of theirs: ``(plain token, token id)``."""
    out = shell(server, NEW_CREDENTIAL.format(username=username))
    plain, pk = json.loads(out.strip().splitlines()[-1])
    return str(plain), int(pk)


@asynccontextmanager
async def open_streams(
    server: LiveServer, token: str | None = None, cookie: str | None = None
) -> AsyncIterator[tuple[httpx.Response, Stream]]:
    """A GET stream of a handshake-era session and a listen stream, both opened with ``token`` (or the
    session ``cookie``)."""
    credential = bearer(token) if token else {"Cookie": f"sessionid={cookie}"}
    async with http_client(token, cookie) as http:
        session = await open_session(http, server.url)
        get_headers = session.headers(Accept="text/event-stream")
        async with (
            http.stream("GET", server.url, headers=get_headers) as get,
            listening(server, {"promptsListChanged": True}, "watched", **credential) as listen,
        ):
            assert get.status_code == 200, await get.aread()
            assert (await listen.next())["method"] == "notifications/subscriptions/acknowledged"
            yield get, listen


async def assert_both_end(
    get: httpx.Response, listen: Stream, *servers: LiveServer, changed_by: str = ""
) -> None:
    """Both streams end: the listen request with its ``complete`` result and nothing else, the GET stream
    with no message at all. A stream that stays open fails with the logs of ``servers`` and what the
    process that made the change wrote on its stderr (``changed_by``)."""
    try:
        final = await listen.rest(ENDS_WITHIN)
    except TimeoutError:
        logs = "\n".join(f"--- {server.log_path.name}:\n{server.log()[-4000:]}" for server in servers)
        pytest.fail(
            f"the listen stream was still open after {ENDS_WITHIN}s\n{logs}\n--- the change's stderr:\n"
            f"{changed_by[-4000:]}"
        )
    assert [m.get("result", {}).get("resultType") for m in final] == ["complete"], final
    assert final[0]["id"] == "watched"
    async with asyncio.timeout(ENDS_WITHIN):
        assert [message async for message in sse_events(get)] == []


# -- the periodic check ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def periodic(start: Callable[..., LiveServer]) -> LiveServer:
    return start({"STREAM_RECHECK_INTERVAL": 1.0})


@pytest.fixture(scope="module")
def cookies(periodic: LiveServer) -> dict[str, str]:
    """Session cookies of bob and sam (``tests/authapp/fixtures.py``) on the periodic server."""
    return dict(make_fixtures(periodic)["cookies"])


async def test_a_token_revoked_by_the_command_ends_its_streams_at_the_next_check(
    periodic: LiveServer,
) -> None:
    token, pk = new_credential(periodic, "revoked-by-command")
    async with open_streams(periodic, token) as (get, listen):
        assert "Revoked" in manage(periodic, "mcp_token", "revoke", str(pk))
        await assert_both_end(get, listen)


async def test_streams_whose_credential_still_works_outlive_the_checks(
    periodic: LiveServer, cookies: dict[str, str]
) -> None:
    """A token's and a session cookie's streams, opened before another token's, are checked at least as
    often: once that token's streams have ended at a check, the first ones still deliver."""
    token, _pk = new_credential(periodic, "still-valid")
    other, other_pk = new_credential(periodic, "revoked-beside")
    async with (
        open_streams(periodic, token) as (get, listen),
        open_streams(periodic, cookie=cookies["bob"]) as (cookie_get, cookie_listen),
        open_streams(periodic, other) as (other_get, other_listen),
    ):
        manage(periodic, "mcp_token", "revoke", str(other_pk))
        await assert_both_end(other_get, other_listen)
        await notify(periodic, feature="prompts")
        for stream in (listen, cookie_listen):
            assert (await stream.next())["method"] == "notifications/prompts/list_changed"
        for response in (get, cookie_get):
            async with asyncio.timeout(ENDS_WITHIN):
                message = await anext(sse_events(response))
            assert message["method"] == "notifications/prompts/list_changed"


@pytest.mark.parametrize("change", sorted(QUIET_CHANGES))
async def test_an_expired_token_or_a_deactivated_user_ends_the_streams_at_the_next_check(
    periodic: LiveServer, change: str
) -> None:
    username = f"quiet-{change.replace(' ', '-')}"
    token, pk = new_credential(periodic, username)
    async with open_streams(periodic, token) as (get, listen):
        shell(periodic, QUIET_PRELUDE + QUIET_CHANGES[change].format(pk=pk, username=username))
        await assert_both_end(get, listen)


async def test_a_deactivated_cookie_user_s_streams_end_at_the_next_check(
    periodic: LiveServer, cookies: dict[str, str]
) -> None:
    """The session cookie is read again at each check (not the user the stream opened with)."""
    async with open_streams(periodic, cookie=cookies["sam"]) as (get, listen):
        quiet = QUIET_CHANGES["user deactivated"].format(username="sam")
        shell(periodic, QUIET_PRELUDE + quiet)
        await assert_both_end(get, listen)


# -- the immediate path -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, LiveServer]]:
    """Two workers of one site (PostgreSQL, Redis) that would check a stream's credential only hourly."""
    directory = tmp_path_factory.mktemp("stream-revocation")
    hourly: dict[str, Any] = {"STREAM_RECHECK_INTERVAL": 3600.0}
    with shared_site() as env:
        env = {**env, "MCP_LOG_LEVEL": "INFO"}  # what each worker did, in the failure's message
        a = start_server(directory, hourly, name="a", **env)
        try:
            b = start_server(directory, hourly, name="b", **env)
            try:
                yield a, b
            finally:
                b.stop()
        finally:
            a.stop()


async def test_a_token_revoked_by_the_command_ends_its_streams_at_once(
    workers: tuple[LiveServer, LiveServer],
) -> None:
    a, _b = workers
    token, pk = new_credential(a, "revoked-at-once")
    async with open_streams(a, token) as (get, listen):
        done = run_manage(a.env, "mcp_token", "revoke", str(pk))
        assert done.returncode == 0, done.stderr
        assert "Revoked" in done.stdout
        await assert_both_end(get, listen, a, changed_by=done.stderr)


async def test_a_token_revoked_in_the_admin_of_another_worker_ends_its_streams_at_once(
    workers: tuple[LiveServer, LiveServer],
) -> None:
    a, b = workers
    token, pk = new_credential(a, "revoked-in-admin")
    create_superuser(b)
    admin = await admin_client(b.base)
    try:
        async with open_streams(a, token) as (get, listen):
            done = await run_action(admin, "accesstoken", "revoke", [pk])
            assert done.status_code == 302, done.text
            await assert_both_end(get, listen, a, b)
    finally:
        await admin.aclose()


async def test_a_deactivated_user_s_streams_end_at_once(workers: tuple[LiveServer, LiveServer]) -> None:
    a, _b = workers
    token, _pk = new_credential(a, "deactivated-at-once")
    async with open_streams(a, token) as (get, listen):
        done = run_shell(a.env, DEACTIVATE.format(username="deactivated-at-once"))
        assert done.returncode == 0, done.stderr
        await assert_both_end(get, listen, a, changed_by=done.stderr)
