"""Admin for MCP sessions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib import admin

from .models import Session

__all__ = ["SessionAdmin"]

if TYPE_CHECKING:
    SessionModelAdmin = admin.ModelAdmin[Session]
else:
    SessionModelAdmin = admin.ModelAdmin


@admin.register(Session)
class SessionAdmin(SessionModelAdmin):
    """Read-only view of sessions."""

    list_display = (
        "short_id",
        "client_name",
        "client_version",
        "protocol_version",
        "transport",
        "user",
        "created",
        "last_seen",
        "ended_at",
    )
    list_filter = ("transport", "protocol_version", ("ended_at", admin.EmptyFieldListFilter))
    search_fields = ("id", "client_name")
    readonly_fields = [f.name for f in Session._meta.get_fields() if f.concrete]
    date_hierarchy = "created"

    @admin.display(description="session", ordering="id")
    def short_id(self, obj: Session) -> str:
        return f"{obj.id[:12]}…"

    def has_add_permission(self, request: object) -> bool:
        return False
