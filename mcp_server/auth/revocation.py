"""Credentials that stop working end the streams they opened, on every worker, at once.

A token revoked, changed or deleted (the admin, ``manage.py mcp_token revoke``, ``AccessToken.revoke()``), a
user deactivated, changed or deleted: once the change is committed, :func:`announce` broadcasts a
:class:`~mcp_server.wire.messages.CredentialChanged` over the channel layer, and every worker checks the
credential of that user's open streams again (:class:`~mcp_server.runtime.credentials.CredentialWatches`).
Without a channel layer, or when it cannot be reached, the periodic check (``STREAM_RECHECK_INTERVAL``)
still ends them.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models.signals import post_delete, post_save

from ..conf import mcp_settings
from ..wire.messages import WORKERS_GROUP, CredentialChanged, to_event
from .models import AccessToken

__all__ = ["announce", "connect_signals"]

logger = logging.getLogger("mcp_server.auth")

USER_FIELDS = frozenset({"is_active", "password"})
"""A save of a user that names only other fields (``last_login`` at each sign-in) announces nothing."""


async def _send(message: CredentialChanged) -> None:
    layer = get_channel_layer(mcp_settings.CHANNEL_LAYER)
    if layer is None:
        return
    try:
        await asyncio.wait_for(layer.group_send(WORKERS_GROUP, to_event(message)), mcp_settings.STORE_TIMEOUT)
    except Exception:
        logger.warning("could not tell the workers of a credential change (streams end at their next check)")


def _broadcast(message: CredentialChanged) -> None:
    try:
        async_to_sync(_send)(message)
    except RuntimeError:  # called on an event loop's own thread (Django saves run in a worker thread)
        logger.warning("could not tell the workers of a credential change (streams end at their next check)")


def announce(user_id: Any, token_id: Any = None) -> None:
    """Tell every worker that a credential of ``user_id`` changed, once the current transaction commits."""
    if user_id is None:
        return
    message = CredentialChanged(user_id=user_id, token_id=token_id)
    transaction.on_commit(lambda: _broadcast(message))


def _token_saved(sender: Any, instance: AccessToken, created: bool = False, **kwargs: Any) -> None:
    if not created and not kwargs.get("raw"):
        announce(instance.user_id, instance.pk)


def _token_deleted(sender: Any, instance: AccessToken, **kwargs: Any) -> None:
    announce(instance.user_id, instance.pk)


def _user_saved(sender: Any, instance: Any, created: bool = False, **kwargs: Any) -> None:
    fields = kwargs.get("update_fields")
    if created or kwargs.get("raw") or (fields is not None and not USER_FIELDS & set(fields)):
        return
    announce(instance.pk)


def _user_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    announce(instance.pk)


def connect_signals() -> None:
    """Connect the receivers (from the app config's ``ready``)."""
    user_model = get_user_model()
    post_save.connect(_token_saved, sender=AccessToken, dispatch_uid="mcp_server.token_saved")
    post_delete.connect(_token_deleted, sender=AccessToken, dispatch_uid="mcp_server.token_deleted")
    post_save.connect(_user_saved, sender=user_model, dispatch_uid="mcp_server.user_saved")
    post_delete.connect(_user_deleted, sender=user_model, dispatch_uid="mcp_server.user_deleted")
