"""The admin of the site's authorization server: every app, grant and token, with *Revoke* actions.

django-oauth-toolkit registers its models itself (``oauth2_provider.admin``) with the classes its settings
name; :data:`~mcp_server.oauth.defaults.SAFE_DEFAULTS` names these (``APPLICATION_ADMIN_CLASS`` and the
others; a site's own value wins). They extend DOT's (masked tokens, no adding, no raw delete of tokens)
with what an operator asks: whose, which client, what access, which endpoint, until when; and revoke
through DOT's ``revoke()`` paths (:func:`~mcp_server.oauth.connections.revoke_connections` for whole apps).
This module is imported by DOT's admin module, never before it.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html
from django.utils.translation import ngettext
from oauth2_provider import admin as dot_admin
from oauth2_provider.models import refresh_token_expire_timedelta

from .connections import identity_source, revoke_connections

__all__ = ["AccessTokenAdmin", "ApplicationAdmin", "GrantAdmin", "IDTokenAdmin", "RefreshTokenAdmin"]


def _short(text: str, limit: int = 40) -> str:
    if len(text) <= limit:
        return text
    return format_html('<span title="{}">{}…</span>', text, text[: limit - 1])


def _audience(resource: Any) -> str:
    """The endpoints (RFC 8707 audiences) a token or code is for."""
    return ", ".join(str(r) for r in resource or []) or "-"


class AudienceColumn:
    """The ``audience`` column of tokens and codes: the endpoints (``resource``) they are for."""

    @admin.display(description="endpoint")
    def audience(self, obj: Any) -> str:
        return _audience(obj.resource)


class LiveFilter(admin.SimpleListFilter):
    """Live (usable) or expired: by ``expires``."""

    title = "state"
    parameter_name = "live"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("1", "live"), ("0", "expired")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        now = timezone.now()
        if self.value() == "1":
            return queryset.filter(expires__gt=now)
        if self.value() == "0":
            return queryset.filter(expires__lte=now)
        return queryset


class RevokedFilter(admin.SimpleListFilter):
    """Refresh tokens: live, revoked (rotated ones are kept revoked, to catch a replay), or expired."""

    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("live", "live"), ("revoked", "revoked or rotated"), ("expired", "expired")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        lifetime = refresh_token_expire_timedelta()
        expired = Q(created__lte=timezone.now() - lifetime) if lifetime else Q(pk__in=[])
        if self.value() == "live":
            return queryset.filter(revoked__isnull=True).exclude(expired)
        if self.value() == "revoked":
            return queryset.filter(revoked__isnull=False)
        if self.value() == "expired":
            return queryset.filter(revoked__isnull=True).filter(expired)
        return queryset


class ApplicationAdmin(dot_admin.ApplicationAdmin):  # type: ignore[misc]
    """OAuth clients: where each identity comes from, how many people it holds tokens of; revoke them all."""

    list_display = ("name", "client", "identity", "client_type", "people", "created")
    list_filter = ("registration_source", "client_type")
    search_fields = ("name", "client_id")
    actions = ["revoke_all_tokens"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        live = Q(refreshtoken__revoked__isnull=True)
        people = Count("refreshtoken__user", filter=live, distinct=True)
        return super().get_queryset(request).annotate(people=people)  # type: ignore[no-any-return]

    @admin.display(description="client id", ordering="client_id")
    def client(self, obj: Any) -> str:
        return _short(obj.client_id)

    @admin.display(description="identity", ordering="registration_source")
    def identity(self, obj: Any) -> str:
        return identity_source(obj)

    @admin.display(description="people connected", ordering="people")
    def people(self, obj: Any) -> int:
        """Distinct users holding a live refresh token of it."""
        return int(getattr(obj, "people", 0) or 0)

    @admin.action(description="Revoke all tokens of the selected apps", permissions=["change"])
    def revoke_all_tokens(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        count = revoke_connections(list(queryset.values_list("pk", flat=True)))
        self.message_user(
            request,
            ngettext("Revoked %d token.", "Revoked %d tokens.", count) % count
            + " Their apps must ask each person again.",
            messages.SUCCESS,
        )


class AccessTokenAdmin(AudienceColumn, dot_admin.AccessTokenAdmin):  # type: ignore[misc]
    """Access tokens: whose, which client, scopes, endpoint, expiry, last use (``updated``, to the minute)."""

    list_display = (
        "pk",
        "masked_token",
        "user",
        "application",
        "scope",
        "audience",
        "expires",
        "created",
        "last_used",
    )
    list_filter = (LiveFilter, "application__registration_source")
    date_hierarchy = "created"

    @admin.display(description="last used", ordering="updated")
    def last_used(self, obj: Any) -> Any:
        return obj.updated


class RefreshTokenAdmin(AudienceColumn, dot_admin.RefreshTokenAdmin):  # type: ignore[misc]
    """Refresh tokens: one family per sign-in (rotation keeps the used ones, revoked, to catch a replay)."""

    list_display = (
        "pk",
        "masked_token",
        "user",
        "application",
        "audience",
        "expires",
        "created",
        "revoked",
        "family",
    )
    list_filter = (RevokedFilter, "application__registration_source")
    date_hierarchy = "created"

    @admin.display(description="expires")
    def expires(self, obj: Any) -> Any:
        lifetime = refresh_token_expire_timedelta()
        return obj.created + lifetime if lifetime else None

    @admin.display(description="family")
    def family(self, obj: Any) -> str:
        return str(obj.token_family or "")[:8] or "-"


class GrantAdmin(AudienceColumn, dot_admin.GrantAdmin):  # type: ignore[misc]
    """Authorization codes not yet exchanged (each lives ``AUTHORIZATION_CODE_EXPIRE_SECONDS``)."""

    list_display = ("pk", "masked_code", "user", "application", "scope", "audience", "expires", "created")
    list_filter = (LiveFilter,)
    actions = ["revoke_codes"]

    @admin.action(description="Revoke selected authorization codes", permissions=["delete"])
    def revoke_codes(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        count, _ = queryset.delete()  # a code is revoked by deleting it: it can no longer be exchanged
        self.message_user(request, ngettext("Revoked %d code.", "Revoked %d codes.", count) % count)


class IDTokenAdmin(dot_admin.IDTokenAdmin):  # type: ignore[misc]
    """OpenID Connect ID tokens (MCP sign-in issues none unless OIDC is turned on)."""

    list_display = ("jti", "user", "application", "scope", "expires", "created")
    list_filter = (LiveFilter,)
    actions = ["revoke_tokens"]

    @admin.action(description="Revoke selected ID tokens", permissions=["change"])
    def revoke_tokens(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        count = 0
        for token in queryset:
            token.revoke()
            count += 1
        self.message_user(request, ngettext("Revoked %d ID token.", "Revoked %d ID tokens.", count) % count)
