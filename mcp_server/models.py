"""Database models: MCP sessions (shared by every worker process)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

__all__ = ["Session"]


class Session(models.Model):
    """One MCP session, from ``initialize`` until DELETE, idle expiry or an operator ends it."""

    class Transport(models.TextChoices):
        HTTP = "http", _("Streamable HTTP")
        STDIO = "stdio", _("stdio")

    id = models.CharField(primary_key=True, max_length=64, editable=False)
    server = models.CharField(max_length=100, default="default")
    protocol_version = models.CharField(max_length=20)
    client_name = models.CharField(max_length=200, blank=True)
    client_version = models.CharField(max_length=100, blank=True)
    client_info = models.JSONField(default=dict, blank=True)
    client_capabilities = models.JSONField(default=dict, blank=True)
    log_level = models.CharField(max_length=20, blank=True)
    subscriptions = models.JSONField(default=list, blank=True)
    transport = models.CharField(max_length=10, choices=Transport.choices, default=Transport.HTTP)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="mcp_sessions",
    )
    created = models.DateTimeField(auto_now_add=True, db_index=True)
    last_seen = models.DateTimeField(db_index=True)
    ended_at = models.DateTimeField(null=True, blank=True, db_index=True)
    end_reason = models.CharField(max_length=200, blank=True)

    class Meta:
        verbose_name = _("MCP session")
        verbose_name_plural = _("MCP sessions")
        ordering = ["-last_seen"]

    def __str__(self) -> str:
        client = f"{self.client_name} {self.client_version}".strip() or "unknown client"
        return f"{self.id[:12]}… ({client})"

    @property
    def is_active(self) -> bool:
        """Whether the session has not ended."""
        return self.ended_at is None
