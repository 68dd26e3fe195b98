"""Long-lived streams keep checking the credential that opened them (a GET stream, a ``subscriptions/listen``
stream).

A request is authenticated once, when it arrives; a stream outlives that moment. While a stream of an
authenticated caller is open, the process's table of watches
(:meth:`mcp_server.runtime.credentials.CredentialWatches.watch`) authenticates its request again every
``STREAM_RECHECK_INTERVAL`` seconds, and at once when a
:class:`~mcp_server.wire.messages.CredentialChanged` names the stream's user (a token revoked, a user
deactivated or deleted: :mod:`mcp_server.auth.revocation` broadcasts it to every worker). The check is the
one every request goes through (:func:`mcp_server.auth.authenticate_request`, the configured classes in
order), on a fresh request built from the stream's ASGI scope. When it refuses the credential, or finds
another user or credential than the stream's, the stream is ended through the callback its transport gave.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..core.moved import moved_names

__all__ = ["CredentialWatch", "End", "authenticated", "same_credential"]

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


def authenticated(user: Any, auth: Any) -> bool:
    """Whether ``(user, auth)`` is a caller whose credential can be checked again (not an anonymous one)."""
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


# The table of the streams a process holds is its state: it moved to the runtime (with a warning).
__getattr__ = moved_names(__name__, {"CredentialWatches": "mcp_server.runtime.credentials"})
