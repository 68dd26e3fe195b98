"""The credentials of the long-lived streams this process holds, checked again while each is open.

:class:`CredentialWatches` is one runtime's table of them (``Runtime.credentials``); what a watch is, and how
its credential is checked again (as every request's is), is :mod:`mcp_server.protocol.credentials`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from ..conf import mcp_settings
from ..protocol.credentials import CredentialWatch, End, authenticated

__all__ = ["CredentialWatches"]

logger = logging.getLogger("mcp_server.auth")

RETRY_AFTER = 1.0
"""Seconds before a check that failed (its store did not answer) is tried again, doubling up to the
interval, and before an announced change is checked a second time: a change announced while the database
was slow is not left to the next periodic check."""


class CredentialWatches:
    """The credentials of the streams this process holds (one runtime's)."""

    def __init__(self) -> None:
        self._open: set[CredentialWatch] = set()

    def __len__(self) -> int:
        return len(self._open)

    def poke(self, user_id: Any) -> int:
        """Check the credential of every stream of ``user_id`` now; returns how many."""
        count = 0
        for watch in list(self._open):
            if watch.user_id is not None and str(watch.user_id) == str(user_id):
                watch.wake.set()
                count += 1
        # (an announcement is rare: a token revoked, a user deactivated or given a new password; the log
        # tells a stream that outlived one whether this worker heard of it)
        logger.info("a credential of user %s changed: %d open stream(s) checked now", user_id, count)
        return count

    def watch(self, scope: dict[str, Any], user: Any, auth: Any, end: End) -> asyncio.Task[None] | None:
        """Watch a stream's credential (from now on: a change announced at once is not missed) until the
        task is cancelled (the stream ended), or until the credential no longer authenticates: then ``end``
        is awaited and the task returns. ``None`` for an anonymous stream: nothing to watch."""
        if not authenticated(user, auth):
            return None
        watch = CredentialWatch(scope=scope, user=user, auth=auth)
        self._open.add(watch)
        task = asyncio.create_task(self._hold(watch, end), name="mcp stream credential")
        task.add_done_callback(lambda _task: self._open.discard(watch))
        return task

    async def _hold(self, watch: CredentialWatch, end: End) -> None:
        interval = float(mcp_settings.STREAM_RECHECK_INTERVAL)
        wait = interval
        while True:
            poked = False
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    poked = await watch.wake.wait()
            watch.wake.clear()
            try:
                valid = await watch.still_valid()
            except Exception:  # a store that does not answer: the stream stays, checked again soon
                logger.warning("could not check an open stream's credential", exc_info=True)
                wait = min(interval, max(RETRY_AFTER, 2 * wait if wait < interval else RETRY_AFTER))
                continue
            # An announced change the check did not see yet (a cache entry of the credential, a replica
            # behind its primary) is looked at once more a moment later.
            wait = min(interval, RETRY_AFTER) if poked else interval
            if not valid:
                logger.info("an open stream's credential no longer authenticates: the stream ends")
                await end("credential no longer valid")
                return
