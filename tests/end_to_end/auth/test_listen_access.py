"""``subscriptions/listen`` (2026-07-28) follows the caller's permissions, on a live server: resource
subscriptions only for what the caller may read (token scopes, the resource's ``permission``), for exact URIs,
templates and prefixes, checked again at each delivery; ``taskIds`` only for the caller's own tasks; and the
stream has no deadline, whatever ``REQUEST_TIMEOUT`` says.

Users and tokens come from ``tests/authapp/fixtures.py``: alice has no permission, bob may lend
(``catalogue.add_loan``, which ``auth://ledger`` and ``auth://notes/{pk}`` need); ``auth://public`` is
anyone's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.support.auth import bearer, make_fixtures, manage
from tests.support.listen import SUBSCRIPTION, listening, notify
from tests.support.live import LiveServer
from tests.support.tasks import WITH_TASKS, TaskClient

pytestmark = pytest.mark.asyncio

Fixtures = tuple[LiveServer, dict[str, Any]]

PROTECTED = ["auth://ledger", "auth://notes/3", "auth://notes"]
"""A lenders' resource, an instance of a lenders' template, and a prefix over only lenders' resources."""


@pytest.fixture(scope="module")
def site(start: Callable[..., LiveServer]) -> Fixtures:
    server = start()
    return server, make_fixtures(server)


def caller_headers(data: dict[str, Any], who: str) -> dict[str, str]:
    """``Authorization`` for a fixture token (none for ``anonymous``)."""
    return {} if who == "anonymous" else bearer(data["tokens"][who])


@pytest.mark.parametrize("who", ["anonymous", "alice", "bob_whoami_only"])
async def test_a_protected_resource_is_neither_honoured_nor_delivered(site: Fixtures, who: str) -> None:
    """Anonymous, a user without the permission, and bob through a token whose scopes name no resource."""
    server, data = site
    asked = {"resourceSubscriptions": PROTECTED, "promptsListChanged": True}
    async with listening(server, asked, "protected", **caller_headers(data, who)) as stream:
        ack = await stream.next()
        assert ack["params"]["notifications"] == {"promptsListChanged": True}
        for uri in ("auth://ledger", "auth://notes/3"):
            await notify(server, uri=uri)
        await notify(server, feature="prompts")  # after the updates: had either been sent, it came first
        assert (await stream.next())["method"] == "notifications/prompts/list_changed"


async def test_a_lender_is_honoured_and_hears_of_the_same_resources(site: Fixtures) -> None:
    """The other side of the test above: with the permission, every filter is kept and each update sent."""
    server, data = site
    asked = {"resourceSubscriptions": PROTECTED}
    async with listening(server, asked, "lender", **bearer(data["tokens"]["bob"])) as stream:
        ack = await stream.next()
        assert ack["params"]["notifications"] == {"resourceSubscriptions": PROTECTED}
        for uri in ("auth://ledger", "auth://notes/3"):
            await notify(server, uri=uri)
            updated = await stream.next()
            assert updated["params"]["uri"] == uri
            assert updated["params"]["_meta"][SUBSCRIPTION] == "lender"


@pytest.mark.parametrize("who", ["anonymous", "alice", "bob_public_only"])
async def test_a_prefix_delivers_only_the_uris_the_caller_may_read(site: Fixtures, who: str) -> None:
    """``auth:`` lies over ``auth://public`` (anyone's) and the lenders' resources: it is honoured, and only
    the readable URI's updates are delivered (bob's ``bob_public_only`` token has the scope of
    ``auth://public`` alone, though bob may lend)."""
    server, data = site
    if who == "bob_public_only" and who not in data["tokens"]:
        created = manage(
            server, "mcp_token", "create", "bob", "--name", who, "--scope", "resource:auth://public"
        )
        data["tokens"][who] = created.strip()
    async with listening(
        server, {"resourceSubscriptions": ["auth:"]}, "prefix", **caller_headers(data, who)
    ) as s:
        ack = await s.next()
        assert ack["params"]["notifications"] == {"resourceSubscriptions": ["auth:"]}
        for uri in ("auth://ledger", "auth://notes/3", "auth://public"):
            await notify(server, uri=uri)
        updated = (
            await s.next()
        )  # the lenders' two were sent before it: had either been delivered, it came first
        assert updated["method"] == "notifications/resources/updated"
        assert updated["params"]["uri"] == "auth://public"


async def test_a_listener_gets_none_of_another_users_tasks(site: Fixtures) -> None:
    """Alice asks for bob's task: not honoured, and none of its status changes reach her stream, while bob's
    own stream hears of them."""
    server, data = site
    bob = bearer(data["tokens"]["bob"])
    created = await TaskClient(server.url, headers=bob).create(
        "slow_compute", {"seconds": 2.0, "label": "bob's"}
    )
    task_id = created["taskId"]
    alice = bearer(data["tokens"]["alice"])
    asked = {"taskIds": [task_id], "promptsListChanged": True}
    async with (
        listening(server, asked, "alice", WITH_TASKS, **alice) as on_alice,
        listening(server, {"taskIds": [task_id]}, "bob", WITH_TASKS, **bob) as on_bob,
    ):
        assert (await on_alice.next())["params"]["notifications"] == {"promptsListChanged": True}
        assert (await on_bob.next())["params"]["notifications"] == {"taskIds": [task_id]}
        status = await on_bob.next()  # the task finished: its notification was queued for every asker
        assert status["method"] == "notifications/tasks"
        assert status["params"]["taskId"] == task_id
        assert status["params"]["status"] == "completed"
        await notify(server, feature="prompts")
        assert (await on_alice.next())["method"] == "notifications/prompts/list_changed"


async def test_a_listen_stream_outlives_request_timeout(start: Callable[..., LiveServer]) -> None:
    """``REQUEST_TIMEOUT`` is 1 s here. A ``slow`` call started after the stream opened is cut at its
    deadline (-32001); by then the stream's own deadline, had it one, has passed: it still delivers."""
    server = start({"REQUEST_TIMEOUT": 1.0})
    async with listening(server, {"promptsListChanged": True}, "no-deadline") as stream:
        await stream.next()
        slow = {"name": "slow", "arguments": {"seconds": 30}}
        _response, answer = await TaskClient(server.url, capabilities={}).post("tools/call", slow)
        assert answer["error"]["code"] == -32001, answer
        await notify(server, feature="prompts")
        changed = await stream.next()
        assert changed["method"] == "notifications/prompts/list_changed"
        assert changed["params"]["_meta"][SUBSCRIPTION] == "no-deadline"
