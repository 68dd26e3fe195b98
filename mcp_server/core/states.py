"""The states of a ledger entry. ``pending`` is the only one that ever changes.

``rate_limited`` is a request refused by a rate limit or a quota before any handler ran: settled at once,
its refusal the outcome."""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

__all__ = ["State"]


class State(models.TextChoices):
    """Where a request stands."""

    PENDING = "pending", _("pending")
    ANSWERED = "answered", _("answered")
    CANCELLED = "cancelled", _("cancelled by the client")
    CLOSED = "closed", _("closed with its session")
    TIMED_OUT = "timed_out", _("timed out")
    ABORTED = "aborted", _("aborted by an operator")
    RATE_LIMITED = "rate_limited", _("refused by a rate limit")
