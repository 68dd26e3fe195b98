"""The apps a person connected (their grants), and revoking them: for the person's page and the admin.

A *connection* is one OAuth client (DOT ``Application``) a user authorized and has not revoked: it holds a
live refresh token or an unexpired access token. Revoking it goes through DOT's own ``revoke()`` paths
(refresh token families, then access tokens; their pending authorization codes are deleted), so
``REFRESH_TOKEN_REUSE_PROTECTION`` keeps its tombstones, and the next MCP request with any of its tokens
is refused with 401. Open streams of the user are told at once (:func:`mcp_server.auth.revocation.announce`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from django.db import router, transaction
from django.utils import timezone
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_grant_model,
    get_refresh_token_model,
    refresh_token_expire_timedelta,
    revoke_access_token,
)

from ..auth.revocation import announce
from .resources import endpoint_title
from .scopes import describe

__all__ = ["Connection", "connections_of", "identity_of", "identity_source", "revoke_connections"]


def identity_of(application: Any) -> tuple[str, str]:
    """Where the client's identity comes from: ``("cimd", host)``, ``("dcr", "")`` or ``("manual", "")``
    (the consent page, the connected-apps page and the admin read it here)."""
    source = str(getattr(application, "registration_source", "") or "manual")
    if source != "cimd":
        return source, ""
    client_id = str(getattr(application, "client_id", ""))
    return source, urlsplit(client_id).hostname or client_id


def identity_source(application: Any) -> str:
    """Where the client's identity comes from, in words: registered here, self-registered, or a CIMD host."""
    source, host = identity_of(application)
    if source == "cimd":
        return f"Client ID Metadata Document at {host}"
    if source == "dcr":
        return "Registered itself (dynamic client registration)"
    return "Registered by this site"


@dataclass
class Connection:
    """One app a user connected: the client, when, when last used, and what it may do."""

    application: Any
    connected: datetime | None = None
    """When the person first allowed it (the oldest token of its live refresh token families)."""
    last_used: datetime | None = None
    """The last MCP request or token refresh it made (recorded at most once a minute: ``usage``)."""
    scopes: list[str] = field(default_factory=list)
    resources: list[str] = field(default_factory=list)
    """The MCP endpoints (RFC 8707 audiences) its tokens are for."""

    @property
    def access(self) -> list[str]:
        """The scopes in words."""
        return [describe(scope) for scope in self.scopes]

    @property
    def servers(self) -> list[str]:
        """The MCP servers it may use: their titles (their URLs when untitled)."""
        return [endpoint_title(urlsplit(url).path) or url for url in self.resources]

    @property
    def identity(self) -> str:
        """Where the client's identity comes from (:func:`identity_source`)."""
        return identity_source(self.application)


def _latest(*values: datetime | None) -> datetime | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _earliest(*values: datetime | None) -> datetime | None:
    present = [v for v in values if v is not None]
    return min(present) if present else None


def connections_of(user: Any, now: datetime | None = None) -> list[Connection]:
    """The apps ``user`` connected, most recently used first (three queries, whatever their number)."""
    now = now or timezone.now()
    lifetime = refresh_token_expire_timedelta()
    refresh_rows = list(
        get_refresh_token_model()
        .objects.filter(user=user)
        .values("application_id", "token_family", "created", "revoked")
    )
    access_rows = list(
        get_access_token_model()
        .objects.filter(user=user)
        .values("application_id", "created", "updated", "expires", "scope", "resource")
        .order_by("created")
    )
    live_families: dict[Any, set[Any]] = {}
    found: dict[Any, Connection] = {}
    for row in refresh_rows:
        if row["revoked"] is None and (lifetime is None or row["created"] + lifetime > now):
            live_families.setdefault(row["application_id"], set()).add(row["token_family"] or row["created"])
            found.setdefault(row["application_id"], Connection(application=None))
    for row in access_rows:
        if row["expires"] > now:
            found.setdefault(row["application_id"], Connection(application=None))
    for row in refresh_rows:
        connection = found.get(row["application_id"])
        families = live_families.get(row["application_id"], set())
        if connection is not None and (row["token_family"] or row["created"]) in families:
            connection.connected = _earliest(connection.connected, row["created"])
            connection.last_used = _latest(connection.last_used, row["created"])  # a refresh is a use
    for row in access_rows:  # oldest first: the newest token's scopes and audiences win
        connection = found.get(row["application_id"])
        if connection is None:
            continue
        if row["expires"] > now:
            connection.connected = _earliest(connection.connected, row["created"])
        connection.last_used = _latest(connection.last_used, row["updated"], row["created"])
        connection.scopes = (row["scope"] or "").split()
        connection.resources = list(row["resource"] or [])
    applications = get_application_model().objects.in_bulk([pk for pk in found if pk is not None])
    out = []
    for pk, connection in found.items():
        connection.application = applications.get(pk)
        if connection.application is not None:
            out.append(connection)
    out.sort(key=lambda c: c.last_used or c.connected or now, reverse=True)
    return out


def _revoke_one(application_id: Any, user: Any) -> tuple[int, set[Any]]:
    """Revoke every token of ``application_id`` (of ``user`` only, unless ``None``); ``(count, user ids)``."""
    owner = {} if user is None else {"user": user}
    refresh_model, access_model = get_refresh_token_model(), get_access_token_model()
    live = refresh_model.objects.filter(application_id=application_id, revoked__isnull=True, **owner)
    users = set(live.values_list("user_id", flat=True))
    access = access_model.objects.filter(application_id=application_id, **owner)
    users |= set(access.values_list("user_id", flat=True))
    count = live.count() + access.filter(refresh_token__isnull=True).count()
    families = set(live.exclude(token_family=None).values_list("token_family", flat=True))
    for family in families:  # DOT's set-based revoke: every live member revoked, their access tokens gone
        refresh_model.revoke_family(family)
    for refresh_token in live.filter(token_family=None):
        refresh_token.revoke()
    for access_token in access.all():  # what is left: access tokens without a refresh token
        revoke_access_token(access_token)
    get_grant_model().objects.filter(application_id=application_id, **owner).delete()  # codes not yet used
    return count, users


def revoke_connections(application_ids: Iterable[Any], user: Any = None) -> int:
    """Revoke the tokens the applications hold (a user's only, when ``user`` is given); how many.

    Each application in one transaction; the users whose tokens were revoked are announced, so that their
    open MCP streams check their credential at once.
    """
    database = router.db_for_write(get_access_token_model())
    total = 0
    for application_id in application_ids:
        with transaction.atomic(using=database):
            count, users = _revoke_one(application_id, user)
            for user_id in users:
                announce(user_id)
        total += count
    return total
