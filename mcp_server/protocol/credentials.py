"""Long-lived streams keep checking the credential that opened them (a GET stream, a ``subscriptions/listen``
stream).

A request is authenticated once, when it arrives; a stream outlives that moment. While a stream of an
authenticated caller is open, :meth:`CredentialWatches.watch` authenticates its request again every
``STREAM_RECHECK_INTERVAL`` seconds, and at once when a
:class:`~mcp_server.wire.messages.CredentialChanged` names the stream's user (a token revoked, a user
deactivated or deleted: :mod:`mcp_server.auth.revocation` broadcasts it to every worker). The check is the
one every request goes through (:func:`mcp_server.auth.authenticate_request`, the configured classes in
order), on a fresh request built from the stream's ASGI scope. When it refuses the credential, or finds
another user or credential than the stream's, the stream is ended through the callback its transport gave.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..conf import mcp_settings

__all__ = ["CredentialWatch", "CredentialWatches", "same_credential"]

logger = logging.getLogger("mcp_server.auth")

End = Callable[[str], Awaitable[None]]
"""Ends a stream; given the reason (e.g. ``"credential revoked"``)."""


def _identity(value: Any) -> Any:
    pk = getattr(value, "pk", None)
    return (type(value), pk) if pk is not None else value


def same_credential(first: tuple[Any, Any], second: tuple[Any, Any]) -> bool:
    """Whether two ``(user, auth)`` results name the same user through the same credential."""
    (user_a, auth_a), (user_b, auth_b) = first, second
    return bool(getattr(user_a, "pk", None) == getattr(user_b, "pk", None)) and bool(
        _identity(auth_a) == _identity(auth_b)
    )


def _authenticated(user: Any, auth: Any) -> bool:
    return auth is not None or bool(getattr(user, "is_authenticated", False))


@dataclass(eq=False)
class CredentialWatch:
    """One open stream's credential: the ASGI scope of its request, and who it authenticated as."""

    scope: dict[str, Any]
    user: Any
    auth: Any
    wake: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def user_id(self) -> Any:
        """The pk of the stream's user."""
        return getattr(self.user, "pk", None)

    async def still_valid(self) -> bool:
        """Authenticate the stream's request again: ``True`` while it is the same user and credential.

        Raises :class:`~mcp_server.core.stores.StoreUnavailable` when the database does not answer."""
        from django.core.handlers.asgi import ASGIRequest

        from ..auth import Unauthorized, authenticate_request

        # Without the user Channels' AuthMiddlewareStack put in the scope when the stream opened: a session
        # cookie is read again from the session store, as on a new request.
        scope = {key: value for key, value in self.scope.items() if key not in ("user", "session")}
        request = ASGIRequest(scope, io.BytesIO(b""))
        try:
            now = await authenticate_request(request)
        except Unauthorized:
            return False
        return same_credential((self.user, self.auth), now)


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
        return count

    def watch(self, scope: dict[str, Any], user: Any, auth: Any, end: End) -> asyncio.Task[None] | None:
        """Watch a stream's credential (from now on: a change announced at once is not missed) until the
        task is cancelled (the stream ended), or until the credential no longer authenticates: then ``end``
        is awaited and the task returns. ``None`` for an anonymous stream: nothing to watch."""
        if not _authenticated(user, auth):
            return None
        watch = CredentialWatch(scope=scope, user=user, auth=auth)
        self._open.add(watch)
        task = asyncio.create_task(self._hold(watch, end), name="mcp stream credential")
        task.add_done_callback(lambda _task: self._open.discard(watch))
        return task

    async def _hold(self, watch: CredentialWatch, end: End) -> None:
        interval = float(mcp_settings.STREAM_RECHECK_INTERVAL)
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await watch.wake.wait()
            watch.wake.clear()
            try:
                valid = await watch.still_valid()
            except Exception:  # a store that does not answer: the stream stays, checked next time
                logger.warning("could not check an open stream's credential", exc_info=True)
                continue
            if not valid:
                logger.info("an open stream's credential no longer authenticates: the stream ends")
                await end("credential no longer valid")
                return
