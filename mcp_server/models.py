"""Database models: MCP sessions and the request ledger (shared by every worker process)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from .auth.models import AccessToken
from .core.limit_rules import PER, QUOTA_PERIODS, Rule, parse_quota, parse_rule
from .core.records import id_of_key
from .core.states import State

__all__ = ["AccessToken", "LedgerEntry", "Quota", "RateLimit", "Session", "Task"]


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
    client_address = models.CharField(
        max_length=100, blank=True, help_text=_("The caller's address (ASGI scope's client) at initialize.")
    )

    class Meta:
        verbose_name = _("MCP session")
        verbose_name_plural = _("MCP sessions")
        ordering = ["-last_seen"]
        indexes = [
            # MAX_SESSIONS_PER_CLIENT counts the open sessions of an address (anonymous callers) or a user.
            models.Index(fields=["client_address", "ended_at"], name="mcp_session_address_open"),
            models.Index(fields=["user", "ended_at"], name="mcp_session_user_open"),
            # Idle expiry walks the open sessions least recently seen first.
            models.Index(
                fields=["last_seen"], condition=models.Q(ended_at__isnull=True), name="mcp_session_open_seen"
            ),
            # The admin's filter lists the distinct revisions.
            models.Index(fields=["protocol_version"], name="mcp_session_protocol"),
        ]

    def __str__(self) -> str:
        client = f"{self.client_name} {self.client_version}".strip() or "unknown client"
        return f"{self.id[:12]}… ({client})"

    @property
    def is_active(self) -> bool:
        """Whether the session has not ended."""
        return self.ended_at is None


class LedgerEntry(models.Model):
    """One request, recorded from arrival until it is settled (database ledger backend)."""

    State = State

    session = models.ForeignKey(
        Session,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="requests",
        db_constraint=False,
        db_index=False,  # mcp_ledger_session_state leads with it
    )
    request_key = models.CharField(_("request id"), max_length=200)
    long_id = models.TextField(
        _("whole request id"),
        blank=True,
        default="",
        help_text=_("A string id too long for the request id column, which then holds its hash and prefix."),
    )
    method = models.CharField(max_length=100, db_index=True)
    name = models.CharField(_("tool, resource or prompt"), max_length=300, blank=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_constraint=False,
    )
    worker = models.CharField(max_length=200)
    channel = models.CharField(max_length=200, blank=True)
    created = models.DateTimeField(db_index=True)
    deadline = models.DateTimeField(null=True, blank=True)
    lease_expires = models.DateTimeField(null=True, blank=True)
    state = models.CharField(max_length=20, choices=State.choices, default=State.PENDING)
    settled_at = models.DateTimeField(null=True, blank=True, db_index=True)
    outcome = models.JSONField(null=True, blank=True)
    protocol_version = models.CharField(
        _("protocol revision"),
        max_length=20,
        blank=True,
        default="",
        help_text="The MCP revision the request was served at (2026-07-28 requests have no session).",
    )
    client = models.CharField(
        max_length=200,
        blank=True,
        default="",
        help_text=_("Name and version the client gave (at 2026-07-28 each request names its client)."),
    )
    oauth_client_id = models.CharField(
        _("OAuth client id"),
        max_length=255,
        blank=True,
        default="",
        help_text=_("The OAuth client whose access token authenticated the request (empty: none)."),
    )
    oauth_client_name = models.CharField(
        _("OAuth client"),
        max_length=255,
        blank=True,
        default="",
        help_text=_("That client's registered name."),
    )
    trace_id = models.CharField(
        _("trace id"),
        max_length=32,
        blank=True,
        default="",
        help_text=_("The trace id of the request's server span (empty: no span, telemetry off)."),
    )
    span_id = models.CharField(
        _("span id"), max_length=16, blank=True, default="", help_text=_("That span's own id.")
    )
    round_of = models.CharField(
        _("answers round"),
        max_length=64,
        blank=True,
        default="",
        help_text=_(
            "2026-07-28: the input_required round this request retries (that round's outcome['round'])."
        ),
    )

    class Meta:
        verbose_name = _("MCP request")
        verbose_name_plural = _("MCP requests")
        ordering = ["-created"]
        constraints = [
            models.UniqueConstraint(
                fields=["session", "request_key"],
                condition=models.Q(state="pending"),
                name="mcp_one_pending_request_per_id",
            )
        ]
        indexes = [
            # Pending rows only: what the live page, the upkeep and the metrics look up. Most rows are
            # written already settled (behind the request path) and never enter these two.
            models.Index(fields=["created"], condition=models.Q(state="pending"), name="mcp_ledger_pending"),
            models.Index(
                fields=["worker", "created"],
                condition=models.Q(state="pending"),
                name="mcp_ledger_pending_worker",
            ),
            # A session's pending requests (the admin's count, pruning), and its rows when it is pruned.
            models.Index(fields=["session", "state"], name="mcp_ledger_session_state"),
        ]

    def __str__(self) -> str:
        return f"{self.method} {self.request_id!r} ({self.state})"

    @property
    def request_id(self) -> str | int:
        """The JSON-RPC id with its original type."""
        return id_of_key(self.request_key, self.long_id)


class Task(models.Model):
    """A task of the ``io.modelcontextprotocol/tasks`` extension (2026-07-28): a ``tools/call`` answered
    ``resultType: "task"`` whose tool goes on running. Any worker answers ``tasks/get`` from this row; the
    worker running it renews ``lease_expires`` while it lives, and a survivor fails it once the lease ran out.
    The ``tools/call`` that created it is the ledger row whose outcome names it (``{"task": <id>}``).
    """

    class Status(models.TextChoices):
        WORKING = "working", _("working")
        INPUT_REQUIRED = "input_required", _("input required")
        COMPLETED = "completed", _("completed")
        FAILED = "failed", _("failed")
        CANCELLED = "cancelled", _("cancelled")

    id = models.CharField(_("task id"), primary_key=True, max_length=64, editable=False)
    server = models.CharField(max_length=100, default="default")
    owner = models.CharField(
        max_length=100, help_text=_("Who may see the task: user:<pk>, or anonymous (the id alone).")
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_constraint=False,
    )
    tool = models.CharField(max_length=300)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.WORKING)
    status_message = models.CharField(max_length=500, blank=True, default="")
    created = models.DateTimeField(db_index=True)
    updated = models.DateTimeField(_("last updated"))
    ttl_ms = models.BigIntegerField(null=True, blank=True)
    poll_interval_ms = models.IntegerField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True, db_index=True)
    worker = models.CharField(max_length=200, blank=True)
    channel = models.CharField(max_length=200, blank=True)
    lease_expires = models.DateTimeField(null=True, blank=True)
    client_address = models.CharField(
        max_length=100,
        blank=True,
        default="",
        help_text=_("An anonymous caller's address: MAX_TASKS_PER_OWNER counts anonymous tasks by it."),
    )
    deadline = models.DateTimeField(
        null=True, blank=True, help_text=_("When the task fails if still live (TASK_MAX_DURATION or TTL).")
    )
    input_requests = models.JSONField(default=dict, blank=True)
    input_responses = models.JSONField(default=dict, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    version = models.IntegerField(default=0)

    class Meta:
        verbose_name = _("MCP task")
        verbose_name_plural = _("MCP tasks")
        ordering = ["-created"]
        indexes = [
            # Live tasks first (the admin), and the orphans of dead workers (upkeep).
            models.Index(fields=["status", "lease_expires"], name="mcp_task_status_lease"),
            models.Index(fields=["worker", "status"], name="mcp_task_worker_status"),
            # The live tasks of one owner (MAX_TASKS_PER_OWNER).
            models.Index(fields=["owner", "client_address", "status"], name="mcp_task_owner_live"),
        ]

    def __str__(self) -> str:
        return f"{self.tool} {self.id[:12]}… ({self.status})"


class StreamEvent(models.Model):
    """One SSE event of a handshake-era stream, kept for ``Last-Event-ID`` replay (database event store).

    ``seq`` 0 rows open a stream (its priming event; on a POST stream, one per request it carries, with that
    request's key); a response carries its request's key; the row with ``last`` set ends the stream.
    """

    session_id = models.CharField(max_length=64)
    stream_id = models.CharField(max_length=40)
    seq = models.BigIntegerField()
    request_key = models.CharField(max_length=200, blank=True, default="")
    data = models.TextField(blank=True, default="")
    last = models.BooleanField(default=False)
    created = models.DateTimeField(db_index=True)

    class Meta:
        verbose_name = _("stream event")
        verbose_name_plural = _("stream events")
        indexes = [
            models.Index(fields=["stream_id", "seq"], name="mcp_event_stream_seq"),
            models.Index(fields=["session_id", "request_key"], name="mcp_event_session_request"),
        ]

    def __str__(self) -> str:
        return f"{self.stream_id}:{self.seq}"


class _LimitRow(models.Model):
    """What a rate limit's row and a quota's share: a unique name, whether it is in force, when it changed,
    and a form that refuses what its rule would not parse (``clean``)."""

    name = models.CharField(max_length=100, unique=True)
    enabled = models.BooleanField(default=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def as_rule(self) -> Rule:
        """The row as a parsed rule; raises ``ValueError`` when it is not a valid one."""
        raise NotImplementedError

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        try:
            self.as_rule()
        except ValueError as exc:
            raise ValidationError(str(exc)) from None


class RateLimit(_LimitRow):
    """A rate limit staff set in the admin: it overrides the ``RATE_LIMITS`` rule with the same ``per`` and
    ``target`` (a disabled row removes that rule), and every worker reads the rows again every
    ``RATE_LIMIT_RELOAD`` seconds (``None``, the default: rows are not read)."""

    per = models.CharField(max_length=10, choices=[(p, p) for p in PER])
    target = models.CharField(max_length=300, default="*", help_text=_("tool:<glob>, resource:<glob>, ..."))
    rate = models.CharField(max_length=40, help_text=_("<count>/<period>, e.g. 600/hour"))
    burst = models.PositiveIntegerField(null=True, blank=True)

    def as_rule(self) -> Rule:
        """The row as a parsed rule; raises ``ValueError`` when it is not a valid one."""
        raw: dict[str, Any] = {"per": self.per, "target": self.target, "rate": self.rate, "name": self.name}
        if self.burst is not None:
            raw["burst"] = self.burst
        return parse_rule(raw)


class Quota(_LimitRow):
    """A daily or monthly quota staff set in the admin: it overrides the ``QUOTAS`` entry with the same
    ``per`` and ``target`` (a disabled row removes it), read again with the rate limits' rows (every
    ``RATE_LIMIT_RELOAD`` seconds; ``None``: rows are not read)."""

    per = models.CharField(max_length=10, choices=[(p, p) for p in PER], default="user")
    target = models.CharField(max_length=300, default="*", help_text=_("tool:<glob>, resource:<glob>, ..."))
    quota = models.PositiveIntegerField(help_text=_("calls allowed in each period"))
    period = models.CharField(max_length=10, choices=[(p, p) for p in QUOTA_PERIODS], default="day")

    def as_rule(self) -> Rule:
        """The row as a parsed quota; raises ``ValueError`` when it is not a valid one."""
        raw = {"per": self.per, "target": self.target, "quota": self.quota, "period": self.period}
        return parse_quota({**raw, "name": self.name})

    def clean(self) -> None:
        from django.core.exceptions import ValidationError

        try:
            self.as_rule()
        except ValueError as exc:
            raise ValidationError(str(exc)) from None
