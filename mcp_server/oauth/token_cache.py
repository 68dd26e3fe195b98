"""OAuth access tokens looked up once, then served from the shared cache, with revocation seen at once.

The row of a token (DOT's ``AccessToken`` with its user and application; the user's password hash, the
client secret's hash left out) is kept in the default cache for
``MCP_SERVER["OAUTH_TOKEN_CACHE_TTL"]`` seconds (never past the token's expiry), keyed by the token's
SHA-256 checksum: the cache never holds a usable token. Whatever makes a token stop (its revocation through
``/oauth/revoke/``, the admin or a replayed refresh token, its deletion, a change of its user or
application, their deletion) replaces the entry by a tombstone
through Django's signals, before the change even commits. A tombstone is never overwritten by a request
that read the row just before (``cache.add``), and sends the next requests to the database for the TTL.

Only a cache that every process shares (Redis, Memcached, the database) is used: with a per-process one
(``LocMemCache``, ``DummyCache``) a change made in another process (another worker, ``manage.py``) would go
unseen, so tokens are then read from the database on every request.
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.contrib.auth import get_user_model
from django.core.cache import caches
from django.core.cache.backends.dummy import DummyCache
from django.core.cache.backends.locmem import LocMemCache
from django.db.models.signals import post_delete, post_save, pre_delete
from django.utils import timezone

from ..conf import mcp_settings

__all__ = ["TOMBSTONE", "cache_key", "checksum_of", "connect_signals", "forget", "lookup"]

TOMBSTONE = "stopped"
"""The value that replaces the entry of a token that stopped or changed."""

LAST_LOGIN_ONLY = frozenset({"last_login"})
"""A user's save that names only these fields (each sign-in) keeps their tokens' entries."""


_client: list[Any] = []


def _cache() -> Any:
    """One client of the default cache for the process: ``caches[...]`` in async code builds one per task,
    with a new connection each (as the cache ledger does)."""
    if not _client:
        _client.append(caches["default"])
    return _client[0]


def cache_key(checksum: str) -> str:
    """The cache key of the token with SHA-256 ``checksum``."""
    return "mcp-oauth-token:" + checksum


def checksum_of(plain: str) -> str:
    """DOT's lookup checksum of a token (SHA-256, hex)."""
    return hashlib.sha256(plain.encode()).hexdigest()


async def _from_database(checksum: str) -> Any:
    from oauth2_provider.models import get_access_token_model

    rows = (
        get_access_token_model()
        .objects.select_related("user", "application")
        .defer("user__password", "application__client_secret")  # never in the cache
        .filter(token_checksum=checksum)
    )
    return await rows.afirst()


def _ttl() -> float:
    """``OAUTH_TOKEN_CACHE_TTL``, or 0 when the default cache is not shared by every process."""
    if isinstance(_cache(), LocMemCache | DummyCache):
        return 0.0
    return float(mcp_settings.OAUTH_TOKEN_CACHE_TTL or 0)


async def lookup(checksum: str) -> Any:
    """The ``AccessToken`` row of ``checksum`` (user and application loaded), or ``None`` when unknown."""
    ttl = _ttl()
    if ttl <= 0:
        return await _from_database(checksum)
    key = cache_key(checksum)
    cached = await _cache().aget(key)
    if cached is not None and cached != TOMBSTONE:
        return cached
    token = await _from_database(checksum)
    if token is not None and cached is None:
        left = (token.expires - timezone.now()).total_seconds()
        if left > 0:
            await _cache().aadd(key, token, min(ttl, left))
    return token


def forget(checksums: list[str]) -> None:
    """Replace the entries of these tokens by tombstones (for the TTL: no request fills them again)."""
    ttl = _ttl()
    if ttl > 0 and checksums:
        _cache().set_many({cache_key(c): TOMBSTONE for c in checksums if c}, ttl)


def _forget_tokens_of(**lookup_fields: Any) -> None:
    from oauth2_provider.models import get_access_token_model

    rows = get_access_token_model().objects.filter(**lookup_fields)
    forget(list(rows.values_list("token_checksum", flat=True)))


def _token_changed(sender: Any, instance: Any, created: bool = False, **kwargs: Any) -> None:
    if not created and not kwargs.get("raw"):
        forget([instance.token_checksum])


def _token_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    forget([instance.token_checksum])


def _user_changed(sender: Any, instance: Any, created: bool = False, **kwargs: Any) -> None:
    fields = kwargs.get("update_fields")
    if created or kwargs.get("raw") or (fields is not None and set(fields) <= LAST_LOGIN_ONLY):
        return
    _forget_tokens_of(user_id=instance.pk)


def _user_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    _forget_tokens_of(user_id=instance.pk)  # (their rows go with the user: each deletion forgets it too)


def _application_changed(sender: Any, instance: Any, created: bool = False, **kwargs: Any) -> None:
    if not created and not kwargs.get("raw"):
        _forget_tokens_of(application_id=instance.pk)


def _application_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    _forget_tokens_of(application_id=instance.pk)


def connect_signals() -> None:
    """Connect the receivers that forget a token's entry (from the app config's ``ready``)."""
    from oauth2_provider.models import get_access_token_model, get_application_model

    token, application, user = get_access_token_model(), get_application_model(), get_user_model()
    uid = "mcp_server.oauth.token_cache."
    post_save.connect(_token_changed, sender=token, dispatch_uid=uid + "token_saved")
    post_delete.connect(_token_deleted, sender=token, dispatch_uid=uid + "token_deleted")
    post_save.connect(_user_changed, sender=user, dispatch_uid=uid + "user_saved")
    pre_delete.connect(_user_deleted, sender=user, dispatch_uid=uid + "user_deleted")
    post_save.connect(_application_changed, sender=application, dispatch_uid=uid + "application_saved")
    pre_delete.connect(_application_deleted, sender=application, dispatch_uid=uid + "application_deleted")
