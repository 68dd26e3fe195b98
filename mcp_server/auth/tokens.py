"""Authentication by bearer token (``Authorization: Bearer mcp_…``), checked against ``AccessToken``."""

from __future__ import annotations

from datetime import timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.db import connections, router
from django.db.models import Field
from django.db.models.sql import Query
from django.http import HttpRequest

from ..conf import now as clock_now
from ..core.asgi_request import header_value
from .base import AuthenticationFailed, AuthResult, BaseAuthentication

if TYPE_CHECKING:
    from .models import AccessToken

__all__ = ["TokenAuthentication", "bearer_token", "find_token"]

LAST_USED_EVERY = timedelta(seconds=60)
"""``last_used`` is written at most this often per token."""


def bearer_token(request: HttpRequest) -> str | None:
    """The token of an ``Authorization: Bearer …`` header, ``None`` without one; malformed ones fail."""
    header = header_value(request, "authorization") or ""  # the request itself need not be built
    scheme, _sep, value = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    value = value.strip()
    if not value or " " in value:
        raise AuthenticationFailed("Malformed Authorization header", error="invalid_request")
    return value


@lru_cache(maxsize=8)
def _token_query(alias: str) -> tuple[str, tuple[Field[Any, Any], ...], tuple[Field[Any, Any], ...]]:
    """The SQL of a token joined to its user by ``key_hash`` (``%s``) on ``alias``, and the columns' fields.

    Built once per database: the ORM would compile the same ``select_related`` query on every request.
    """
    from .models import AccessToken

    token_meta, user_meta = AccessToken._meta, get_user_model()._meta
    token_fields = tuple(token_meta.concrete_fields)
    user_fields = tuple(user_meta.concrete_fields)
    ops = connections[alias].ops

    def quote(name: str | None) -> str:
        return ops.quote_name(str(name))

    user_fk = token_meta.get_field("user")
    target = getattr(user_fk, "target_field", None) or user_meta.pk
    columns = [f"t.{quote(f.column)}" for f in token_fields] + [f"u.{quote(f.column)}" for f in user_fields]
    sql = (
        f"SELECT {', '.join(columns)} FROM {quote(token_meta.db_table)} t"
        f" JOIN {quote(user_meta.db_table)} u ON u.{quote(target.column)} = t.{quote(user_fk.column)}"
        f" WHERE t.{quote(token_meta.get_field('key_hash').column)} = %s"
    )
    return sql, token_fields, user_fields


def _find_token(key_hash: str) -> AccessToken | None:
    from .models import AccessToken

    alias = router.db_for_read(AccessToken)
    sql, token_fields, user_fields = _token_query(alias)
    connection = connections[alias]
    with connection.cursor() as cursor:
        cursor.execute(sql, [key_hash])
        row = cursor.fetchone()
    if row is None:
        return None
    fields = token_fields + user_fields
    compiler = connection.ops.compiler("SQLCompiler")(Query(AccessToken), connection, alias)
    converters = compiler.get_converters([f.get_col(f.model._meta.db_table) for f in fields])
    values = next(iter(compiler.apply_converters([list(row)], converters))) if converters else list(row)
    split = len(token_fields)
    token = AccessToken.from_db(alias, [f.attname for f in token_fields], values[:split])
    token.user = get_user_model().from_db(alias, [f.attname for f in user_fields], values[split:])
    return token


async def find_token(key_hash: str) -> AccessToken | None:
    """The ``AccessToken`` whose ``key_hash`` this is, its user loaded, or ``None``.

    One query, read every time (a revocation, expiry or deactivation made by any process is seen at once),
    built without the ORM's query compilation.
    """
    return await sync_to_async(_find_token)(key_hash)


class TokenAuthentication(BaseAuthentication):
    """Bearer tokens made in the admin or with ``manage.py mcp_token``; ``auth`` is the ``AccessToken``.

    An unknown, expired or revoked token, or one whose user is inactive, is refused with 401
    ``invalid_token``. A header of another scheme (``Basic``, ``Token``) is left to the other classes.
    """

    realm = "mcp"

    def has_credentials(self, request: HttpRequest) -> bool:
        """Only with an ``Authorization`` header (a malformed one is refused by :meth:`authenticate`)."""
        return header_value(request, "authorization") is not None

    async def authenticate(self, request: HttpRequest) -> AuthResult | None:
        from .models import AccessToken, hash_token

        plain = bearer_token(request)
        if plain is None:
            return None
        token = await find_token(hash_token(plain))
        now = clock_now()
        if token is None:
            raise AuthenticationFailed("Unknown token")
        if token.is_revoked:
            raise AuthenticationFailed("The token was revoked")
        if token.is_expired(now):
            raise AuthenticationFailed("The token has expired")
        if not token.user.is_active:
            raise AuthenticationFailed("The token's user is inactive")
        if token.last_used is None or now - token.last_used > LAST_USED_EVERY:
            await AccessToken.objects.filter(pk=token.pk).aupdate(last_used=now)
            token.last_used = now
        return token.user, token

    def authenticate_header(self, request: HttpRequest) -> str | None:
        return f'Bearer realm="{self.realm}"'
