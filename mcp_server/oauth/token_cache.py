"""OAuth access tokens looked up once, then served from the shared cache, with revocation seen at once.

The row of a token (DOT's ``AccessToken`` with its user and application; the user's password hash, the
client secret's hash left out) is kept in the default cache for
``MCP_SERVER["OAUTH_TOKEN_CACHE_TTL"]`` seconds (never past the token's expiry), keyed by the token's
SHA-256 checksum: the cache never holds a usable token. Whatever makes a token stop (its revocation through
``/oauth/revoke/``, the admin or a replayed refresh token, its deletion, a change of its user or
application, their deletion) replaces the entry by a tombstone
through Django's signals, before the change even commits. A tombstone is never overwritten by a request
that read the row just before (``cache.add``), and sends the next requests to the database for the TTL.

With a cache every process shares (Redis, Memcached, the database cache) a cached row is used as it is.
With a per-process ``LocMemCache`` a change made in another process (another worker, ``manage.py``) sends
no signal here, so each request also reads the token's user again, joined to the token, in one raw query
(:func:`current_user`, no ORM compilation): a deleted or revoked token (DOT deletes its row), a deleted
user and a deactivated one are still refused on the very next request, whichever process made the change.
With ``DummyCache`` tokens are read from the database on every request.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.core.cache.backends.dummy import DummyCache
from django.core.cache.backends.locmem import LocMemCache
from django.db import connections, router
from django.db.models.signals import post_delete, post_save, pre_delete
from django.utils import timezone

from ..conf import mcp_settings, process_cache

__all__ = ["TOMBSTONE", "cache_key", "checksum_of", "connect_signals", "current_user", "forget", "lookup"]

TOMBSTONE = "stopped"
"""The value that replaces the entry of a token that stopped or changed."""

LAST_LOGIN_ONLY = frozenset({"last_login"})
"""A user's save that names only these fields (each sign-in) keeps their tokens' entries."""


def _cache() -> Any:
    """The process's one client of the default cache (:func:`~mcp_server.conf.process_cache`)."""
    return process_cache("default")


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


def _shared() -> bool:
    """Whether every process sees the default cache's entries (not ``LocMemCache``)."""
    return not isinstance(_cache(), LocMemCache)


def _ttl() -> float:
    """``OAUTH_TOKEN_CACHE_TTL``, or 0 when the default cache keeps nothing (``DummyCache``)."""
    if isinstance(_cache(), DummyCache):
        return 0.0
    return float(mcp_settings.OAUTH_TOKEN_CACHE_TTL or 0)


@lru_cache(maxsize=8)
def _user_sql(alias: str) -> str:
    """The query of a token's user by checksum (``%s``), for the database ``alias``."""
    from oauth2_provider.models import get_access_token_model

    token, user = get_access_token_model()._meta, get_user_model()._meta
    quote = connections[alias].ops.quote_name
    columns = ", ".join(f"u.{quote(str(f.column))}" for f in user.concrete_fields)
    user_column = quote(token.get_field("user").column)
    checksum_column = quote(token.get_field("token_checksum").column)
    return (
        f"SELECT {columns} FROM {quote(token.db_table)} t JOIN {quote(user.db_table)} u"
        f" ON u.{quote(str(user.pk.column))} = t.{user_column} WHERE t.{checksum_column} = %s"
    )


def _current_user(checksum: str) -> Any:
    from oauth2_provider.models import get_access_token_model

    alias = router.db_for_read(get_access_token_model())
    users = list(get_user_model()._default_manager.db_manager(alias).raw(_user_sql(alias), [checksum]))
    return users[0] if users else None


async def current_user(checksum: str) -> Any:
    """The user of the token with ``checksum`` as the database has them now, or ``None`` when the token (or
    its user) is gone: one raw query (a ``RawQuerySet``: the field converters apply, no compilation)."""
    return await sync_to_async(_current_user)(checksum)


async def lookup(checksum: str) -> Any:
    """The ``AccessToken`` row of ``checksum`` (user and application loaded), or ``None`` when unknown."""
    ttl = _ttl()
    if ttl <= 0:
        return await _from_database(checksum)
    key = cache_key(checksum)
    cached = await _cache().aget(key)
    if cached is not None and cached != TOMBSTONE:
        if _shared():
            return cached
        user = await current_user(checksum)  # per process: what another process changed is read here
        if user is None:
            return None
        cached.user = user
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
