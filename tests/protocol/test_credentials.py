"""Which streams a credential change wakes (``CredentialWatches.poke``) and what counts as the same
credential (``same_credential``), in this process (the streams ending on live servers:
``tests/end_to_end/auth/test_stream_revocation.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.utils import timezone

from mcp_server.auth.models import AccessToken
from mcp_server.protocol.credentials import same_credential
from mcp_server.runtime.credentials import CredentialWatches

ENDS_WITHIN = 15.0
"""Seconds the revoked stream's watch may take to end once poked."""


def token_scope(plain: str) -> dict[str, Any]:
    """The ASGI scope of a request that carried ``plain`` as its bearer token."""
    headers = [(b"host", b"testserver"), (b"authorization", f"Bearer {plain}".encode())]
    return {"type": "http", "method": "POST", "path": "/mcp", "headers": headers, "scheme": "http"}


@pytest.mark.django_db(transaction=True)
async def test_a_change_announced_for_a_user_rechecks_that_user_s_streams_alone(
    settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """``poke`` (a ``CredentialChanged`` heard) checks at once every stream of the user named, and says how
    many: those whose credential no longer works end, the others stay; another user's streams wait for the
    periodic check, even with their own token revoked meanwhile."""
    settings.MCP_SERVER = {**settings.MCP_SERVER, "STREAM_RECHECK_INTERVAL": 3600.0}
    users = get_user_model().objects
    ann, ben = await users.acreate(username="poked-ann"), await users.acreate(username="poked-ben")
    create = sync_to_async(AccessToken.objects.create_token)
    (revoked, revoked_plain), (kept, kept_plain) = await create(ann, "a1"), await create(ann, "a2")
    other, other_plain = await create(ben, "b1")
    watches = CredentialWatches()
    ended: dict[str, asyncio.Event] = {name: asyncio.Event() for name in ("revoked", "kept", "other")}

    def end(name: str) -> Callable[[str], Any]:
        async def ending(reason: str) -> None:
            ended[name].set()

        return ending

    tasks = [
        watches.watch(token_scope(revoked_plain), ann, revoked, end("revoked")),
        watches.watch(token_scope(kept_plain), ann, kept, end("kept")),
        watches.watch(token_scope(other_plain), ben, other, end("other")),
    ]
    assert None not in tasks
    assert len(watches) == 3
    assert watches.watch(token_scope("unused"), None, None, end("other")) is None  # anonymous: unwatched
    try:
        now = timezone.now()
        await AccessToken.objects.filter(pk__in=[revoked.pk, other.pk]).aupdate(revoked_at=now)
        with caplog.at_level("INFO", logger="mcp_server.auth"):
            assert watches.poke(ann.pk) == 2
        assert f"a credential of user {ann.pk} changed: 2 open stream(s)" in caplog.text  # (heard: logged)
        assert tasks[0] is not None
        await asyncio.wait_for(tasks[0], ENDS_WITHIN)  # ended through its callback, then returned
        assert ended["revoked"].is_set()
        assert watches.poke(str(ann.pk)) == 1  # the kept stream alone is left; ids compare as text
        assert not ended["kept"].is_set()
        assert not ended["other"].is_set()
        assert len(watches) == 2
    finally:
        for task in tasks:
            if task is not None:
                task.cancel()
        await asyncio.gather(*(task for task in tasks if task is not None), return_exceptions=True)
    assert len(watches) == 0


async def test_the_same_credential_is_the_same_user_through_the_same_credential() -> None:
    """Models (a token, a user) compare by their row; a credential that is not a model (a key string or
    a claims object from a custom class) compares by value: another key of the same user is another
    credential."""
    model = get_user_model()
    ann, ann_again, ben = model(pk=1, username="ann"), model(pk=1, username="ann"), model(pk=2, username="b")
    assert same_credential((ann, AccessToken(pk=7)), (ann_again, AccessToken(pk=7)))
    assert not same_credential((ann, AccessToken(pk=7)), (ann, AccessToken(pk=8)))
    assert not same_credential((ann, AccessToken(pk=7)), (ben, AccessToken(pk=7)))
    assert same_credential((ann, "key-1"), (ann_again, "key-1"))
    assert not same_credential((ann, "key-1"), (ann, "key-2"))
    assert not same_credential((ann, None), (ben, None))  # a session of another user


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("first_check", ["misses the change", "store does not answer"])
async def test_an_announced_change_is_looked_at_again_a_moment_later(
    settings: Any, monkeypatch: pytest.MonkeyPatch, first_check: str
) -> None:
    """A poke whose check did not see the change yet (a cached credential, a replica behind), or whose
    store did not answer, is checked again after ``RETRY_AFTER``, not at the next periodic check (an hour
    here): the revoked stream still ends at once."""
    from mcp_server.core.stores import StoreUnavailable
    from mcp_server.protocol.credentials import CredentialWatch
    from mcp_server.runtime import credentials

    settings.MCP_SERVER = {**settings.MCP_SERVER, "STREAM_RECHECK_INTERVAL": 3600.0}
    user = await get_user_model().objects.acreate(username="looked-at-again")
    token, plain = await sync_to_async(AccessToken.objects.create_token)(user, "t")
    checked = asyncio.Event()
    real = CredentialWatch.still_valid

    async def first_fails_or_misses(watch: CredentialWatch) -> bool:
        if checked.is_set():
            return await real(watch)
        checked.set()
        if first_check == "store does not answer":
            raise StoreUnavailable("database", "timed out")
        return await real(watch)  # before the change below: still valid

    monkeypatch.setattr(CredentialWatch, "still_valid", first_fails_or_misses)
    ended = asyncio.Event()

    async def end(reason: str) -> None:
        ended.set()

    watches = CredentialWatches()
    task = watches.watch(token_scope(plain), user, token, end)
    assert task is not None
    try:
        assert watches.poke(user.pk) == 1
        await asyncio.wait_for(checked.wait(), ENDS_WITHIN)
        await AccessToken.objects.filter(pk=token.pk).aupdate(revoked_at=timezone.now())  # no announcement
        await asyncio.wait_for(task, credentials.RETRY_AFTER + ENDS_WITHIN)
        assert ended.is_set()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
