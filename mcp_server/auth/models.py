"""Bearer tokens for MCP clients: stored as a SHA-256 hash, shown in plain text once, when made."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

__all__ = ["TOKEN_PREFIX", "AccessToken", "AccessTokenManager", "hash_token"]

TOKEN_PREFIX = "mcp_"
"""Every token starts with this, so that a leaked one is easy to recognise (and to scan for)."""


def hash_token(token: str) -> str:
    """The stored form of a token: SHA-256 hex digest (tokens are 256 random bits, so no salt is needed)."""
    return hashlib.sha256(token.encode()).hexdigest()


if TYPE_CHECKING:
    _Manager = models.Manager["AccessToken"]
else:
    _Manager = models.Manager


class AccessTokenManager(_Manager):
    """``AccessToken.objects``: also makes new tokens."""

    def create_token(
        self,
        user: Any,
        name: str = "",
        *,
        expires: datetime | None = None,
        scopes: list[str] | None = None,
    ) -> tuple[AccessToken, str]:
        """Store a new token for ``user``; returns the row and the plain token (not stored anywhere)."""
        token = self.model(user=user, name=name, expires=expires, scopes=list(scopes or []))
        plain = token.set_new_key()
        token.save(force_insert=True)
        return token, plain


class AccessToken(models.Model):
    """A bearer token an MCP client sends as ``Authorization: Bearer mcp_…``.

    ``scopes`` (empty: no restriction) narrows what the token reaches to the tools, resources and prompts
    it names, as ``tool:<name>``, ``resource:<uri or template>``, ``prompt:<name>`` (shell-style wildcards
    allowed, e.g. ``tool:books_*``); the user's permissions still apply.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mcp_access_tokens"
    )
    name = models.CharField(max_length=100, blank=True, help_text=_("What the token is for."))
    prefix = models.CharField(max_length=20, editable=False, help_text=_("The token's first characters."))
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created = models.DateTimeField(auto_now_add=True)
    expires = models.DateTimeField(null=True, blank=True, help_text=_("Empty: never expires."))
    revoked_at = models.DateTimeField(null=True, blank=True)
    scopes = models.JSONField(
        default=list,
        blank=True,
        help_text=_('Empty: everything the user may use. E.g. ["tool:search_*", "resource:library://*"].'),
    )
    last_used = models.DateTimeField(null=True, blank=True, editable=False)

    objects = AccessTokenManager()

    class Meta:
        verbose_name = _("MCP access token")
        verbose_name_plural = _("MCP access tokens")
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.name or 'token'} ({self.prefix}…)"

    @property
    def is_revoked(self) -> bool:
        """Whether the token was revoked."""
        return self.revoked_at is not None

    def is_expired(self, now: datetime | None = None) -> bool:
        """Whether the token's expiry has passed."""
        return self.expires is not None and self.expires <= (now or timezone.now())

    @property
    def is_valid(self) -> bool:
        """Neither revoked nor expired."""
        return not self.is_revoked and not self.is_expired()

    def set_new_key(self) -> str:
        """Give the (unsaved) token a fresh secret; returns it in plain text, the only time it is seen."""
        plain = TOKEN_PREFIX + secrets.token_urlsafe(32)
        self.key_hash = hash_token(plain)
        self.prefix = plain[: len(TOKEN_PREFIX) + 6]
        return plain

    def revoke(self) -> None:
        """Revoke the token now (it stops working at once, on every worker)."""
        if self.revoked_at is None:
            self.revoked_at = timezone.now()
            self.save(update_fields=["revoked_at"])
