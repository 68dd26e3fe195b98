"""Admin for bearer tokens: create one (its secret is shown once), see when it was used, revoke it."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone

from .models import AccessToken
from .revocation import announce

__all__ = ["AccessTokenAdmin"]

if TYPE_CHECKING:
    TokenModelAdmin = admin.ModelAdmin[AccessToken]
else:
    TokenModelAdmin = admin.ModelAdmin

DEFAULT_LIFETIME = timedelta(days=90)
"""The expiry a new token's form starts with (the field can be cleared for a token that never expires)."""


@admin.register(AccessToken)
class AccessTokenAdmin(TokenModelAdmin):
    """Bearer tokens of MCP clients."""

    list_display = ("__str__", "user", "created", "expires", "last_used", "status")
    list_filter = (("revoked_at", admin.EmptyFieldListFilter),)
    search_fields = ("name", "prefix", "user__username")
    list_select_related = ("user",)
    raw_id_fields = ("user",)
    readonly_fields = ("prefix", "created", "last_used", "revoked_at")
    actions = ["revoke"]

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        return {"expires": timezone.now() + DEFAULT_LIFETIME, **super().get_changeform_initial_data(request)}

    def get_readonly_fields(self, request: HttpRequest, obj: AccessToken | None = None) -> Any:
        return (*self.readonly_fields, "user") if obj is not None else self.readonly_fields

    @admin.display(description="status")
    def status(self, obj: AccessToken) -> str:
        if obj.is_revoked:
            return "revoked"
        return "expired" if obj.is_expired() else "valid"

    def save_model(self, request: HttpRequest, obj: AccessToken, form: Any, change: bool) -> None:
        if not change:
            request._mcp_plain_token = obj.set_new_key()  # type: ignore[attr-defined]
        super().save_model(request, obj, form, change)

    def response_add(
        self, request: HttpRequest, obj: AccessToken, post_url_continue: str | None = None
    ) -> Any:
        plain = getattr(request, "_mcp_plain_token", None)
        if plain is None:
            return super().response_add(request, obj, post_url_continue)
        context = {**self.admin_site.each_context(request), "opts": self.opts, "token": obj, "plain": plain}
        response: HttpResponse = TemplateResponse(
            request, "admin/mcp_server/accesstoken/created.html", context
        )
        response["Cache-Control"] = "no-store"
        return response

    @admin.action(description="Revoke selected tokens", permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[AccessToken]) -> None:
        chosen = queryset.filter(revoked_at__isnull=True)
        owners = list(chosen.values_list("user_id", "pk"))
        count = chosen.update(revoked_at=timezone.now())
        for user_id, pk in owners:  # a bulk update sends no signal: their open streams end at once too
            announce(user_id, pk)
        self.message_user(request, f"Revoked {count} token(s).", messages.SUCCESS)
