"""The live page's WebSocket: a fresh snapshot of pending requests and the last hour, every second.

Snapshots are read from the database (shared by every worker process), so the page is right whichever
worker serves its socket. Only active staff with the view (or change) permission on ledger entries may
connect; the handshake of anyone else is refused (HTTP 403), and the permission is checked again every
:attr:`LiveConsumer.recheck_every` seconds, so a deactivated or demoted user stops receiving data.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.contrib.auth import get_user_model

from .permissions import may_abort, may_watch
from .snapshot import SnapshotSource, snapshots

__all__ = ["LiveConsumer"]

logger = logging.getLogger("mcp_server.admin")

FORBIDDEN = 4403
"""Close code sent when a connected user loses the permission to watch."""


def _current_user(user: Any) -> Any:
    """The user as stored now (``None`` if deleted), so a revoked permission is noticed."""
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    return get_user_model()._default_manager.filter(pk=user.pk).first()


class LiveConsumer(AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    """Pushes ``{"type": "snapshot", ...}`` messages (see :func:`.snapshot.abuild_snapshot`)."""

    interval = 1.0
    recheck_every = 30.0
    source: SnapshotSource = snapshots

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pusher: asyncio.Task[None] | None = None
        self.can_abort = False

    async def _allowed(self) -> tuple[bool, bool]:
        def check() -> tuple[bool, bool]:
            user = _current_user(self.scope.get("user"))
            return may_watch(user), may_abort(user)

        result: tuple[bool, bool] = await database_sync_to_async(check)()
        return result

    async def connect(self) -> None:
        watch, self.can_abort = await self._allowed()
        if not watch:
            await self.close()
            return
        await self.accept()
        self.pusher = asyncio.create_task(self._push(), name="mcp admin live page")

    async def disconnect(self, code: int) -> None:
        if self.pusher is not None:
            self.pusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.pusher
            self.pusher = None

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any
    ) -> None:
        """A frame that is not JSON text (binary, or text that does not parse) is ignored, as any message
        but a refresh is: Channels' own ``receive`` raised, and the socket closed with a traceback."""
        if text_data is None:
            return
        try:
            content = await self.decode_json(text_data)
        except ValueError:
            return
        await self.receive_json(content, **kwargs)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        """``{"type": "refresh"}`` asks for a snapshot now (after an abort); anything else is ignored."""
        if isinstance(content, dict) and content.get("type") == "refresh":
            self.source.reset()
            await self._send_snapshot()

    async def _send_snapshot(self) -> None:
        snapshot = await self.source.get()
        await self.send_json({**snapshot, "can_abort": self.can_abort})

    async def _push(self) -> None:
        loop = asyncio.get_running_loop()
        checked = loop.time()
        while True:
            if loop.time() - checked >= self.recheck_every:
                checked = loop.time()
                watch, self.can_abort = await self._allowed()
                if not watch:
                    await self.close(code=FORBIDDEN)
                    return
            try:
                await self._send_snapshot()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("live page snapshot failed")
            await asyncio.sleep(self.interval)
