"""Admin for MCP sessions and the request ledger, with a live page of pending requests.

Tasks (the 2026-07-28 tasks extension) are listed live ones first, with *Cancel selected tasks*.

Operator actions: *Abort selected requests* answers each pending one with -32003 "Request aborted by an
operator" (:data:`~mcp_server.wire.errors.REQUEST_ABORTED`); *End selected sessions* answers their
in-flight requests -32000 and later requests with their id get 404. Both settle through the ledger's
compare-and-set, so no request is ever answered twice, and both are recorded in the admin log. Rows cannot be
deleted here: deleting a pending row would leave its request unanswered (settled rows are pruned after
``LEDGER_RETENTION``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.db.models import Case, Count, IntegerField, OuterRef, QuerySet, Subquery, Value, When
from django.db.models.expressions import OrderBy
from django.db.models.functions import Coalesce
from django.http import HttpRequest
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html

from .admin_limits import QuotaAdmin, RateLimitAdmin
from .admin_live.operations import END_REASON, TASK_CANCEL_MESSAGE, cancel_tasks, end_sessions
from .admin_live.routing import LIVE_PATH
from .admin_live.ui_tools import UI_LABELS, ui_kind
from .admin_live.views import LivePage, abort_and_log
from .core.states import State
from .models import LedgerEntry, Session, Task
from .telemetry.links import trace_url

__all__ = [
    "AgeFilter",
    "LedgerEntryAdmin",
    "QuotaAdmin",
    "RateLimitAdmin",
    "SessionAdmin",
    "TaskAdmin",
    "ThinChangeList",
    "trace_cell",
]

if TYPE_CHECKING:
    SessionModelAdmin = admin.ModelAdmin[Session]
    LedgerEntryModelAdmin = admin.ModelAdmin[LedgerEntry]
    TaskModelAdmin = admin.ModelAdmin[Task]
else:
    SessionModelAdmin = admin.ModelAdmin
    LedgerEntryModelAdmin = admin.ModelAdmin
    TaskModelAdmin = admin.ModelAdmin


def _duration(delta: timedelta) -> str:
    seconds = max(0.0, delta.total_seconds())
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60)} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60)} min"


class ThinChangeList(ChangeList):
    """A changelist that never loads its model admin's ``list_deferred`` columns (large JSON a client sent,
    a request's outcome): a page of 100 rows costs what 100 short rows cost, however big those values are.
    The change page still shows them whole."""

    def get_queryset(self, request: HttpRequest, exclude_parameters: Any = None) -> QuerySet[Any]:
        queryset = super().get_queryset(request, exclude_parameters)
        deferred = getattr(self.model_admin, "list_deferred", ())
        return queryset.defer(*deferred) if deferred else queryset


def _cut(text: str) -> str:
    """``text`` in a cell that cuts it short with an ellipsis (``changelist.css``); the whole in a tooltip."""
    return format_html('<span class="mcp-cut" title="{}">{}</span>', text, text)


def trace_cell(trace_id: str, span_id: str = "", *, short: bool = True) -> str:
    """A trace id (its first 8 digits when ``short``, the whole in the tooltip), linked to the trace when
    ``TRACE_URL`` makes a link; ``-`` for none. Every value is escaped: the link, the id and the tooltip."""
    if not trace_id:
        return "-"
    shown = f"{trace_id[:8]}…" if short and len(trace_id) > 8 else trace_id
    url = trace_url(trace_id, span_id)
    if url is None:
        return format_html('<span class="mcp-trace" title="trace {}">{}</span>', trace_id, shown)
    return format_html(
        '<a class="mcp-trace" href="{}" title="trace {}" target="_blank" rel="noopener noreferrer">{}</a>',
        url,
        trace_id,
        shown,
    )


def _pending_count() -> Subquery:
    """The count of a session's pending ledger rows, computed for the rows of the page only."""
    pending = (
        LedgerEntry.objects.filter(session_id=OuterRef("pk"), state=State.PENDING)
        .order_by()
        .values("session_id")
        .annotate(count=Count("pk"))
        .values("count")
    )
    return Subquery(pending, output_field=IntegerField())


@admin.register(Session)
class SessionAdmin(SessionModelAdmin):
    """Read-only view of sessions, with their count of pending requests and the *end sessions* action."""

    list_display = (
        "short_id",
        "client_name",
        "client_version",
        "protocol_version",
        "transport",
        "user",
        "client_address",
        "created",
        "last_seen",
        "pending_requests",
        "ended_at",
    )
    list_filter = (
        "transport",
        "protocol_version",
        ("ended_at", admin.EmptyFieldListFilter),
        ("created", admin.DateFieldListFilter),  # not a date hierarchy: that reads every row's date
    )
    search_fields = ("id", "client_name", "client_address")
    readonly_fields = [f.name for f in Session._meta.get_fields() if f.concrete]
    list_select_related = ("user",)
    list_deferred = ("client_info", "client_capabilities", "subscriptions")
    """Columns the list never shows: a client chooses their size."""
    show_full_result_count = False
    actions = ["end_sessions"]

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return ThinChangeList

    def get_queryset(self, request: HttpRequest) -> QuerySet[Session]:
        # A correlated count, not a join with GROUP BY over every session: it runs for the page's rows only.
        return super().get_queryset(request).annotate(pending_count=Coalesce(_pending_count(), 0))

    @admin.display(description="session", ordering="id")
    def short_id(self, obj: Session) -> str:
        return f"{obj.id[:12]}…"

    @admin.display(description="pending")
    def pending_requests(self, obj: Session) -> int:
        return int(getattr(obj, "pending_count", 0))

    @admin.action(
        description="End selected sessions (in-flight requests answer -32000)", permissions=["change"]
    )
    def end_sessions(self, request: HttpRequest, queryset: QuerySet[Session]) -> None:
        active = {session.pk: session for session in queryset.filter(ended_at__isnull=True)}
        ended = end_sessions(active, END_REASON)
        for session_id in ended:
            self.log_change(
                request,
                active[session_id],
                f"Ended the session ({END_REASON}): in-flight requests answered -32000, later ones get 404.",
            )
        skipped = queryset.count() - len(ended)
        note = f"; {skipped} had already ended" if skipped else ""
        self.message_user(request, f"Ended {len(ended)} session(s){note}.", messages.SUCCESS)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Session | None = None) -> bool:
        """Actions need the change permission; the form itself stays read-only."""
        return obj is None and super().has_change_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: Session | None = None) -> bool:
        """Deleting a session would delete its pending requests unanswered: end it instead."""
        return False


class AgeFilter(admin.SimpleListFilter):
    """Requests by how long ago they arrived."""

    title = "age"
    parameter_name = "age"
    bands: dict[str, tuple[float | None, float | None]] = {
        "1m": (None, 60),
        "10m": (60, 600),
        "1h": (600, 3600),
        "older": (3600, None),
    }

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [
            ("1m", "under a minute"),
            ("10m", "1 to 10 minutes"),
            ("1h", "10 minutes to an hour"),
            ("older", "over an hour"),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        band = self.bands.get(str(self.value()))
        if band is None:
            return queryset
        now = timezone.now()
        younger, older = band
        if younger is not None:
            queryset = queryset.filter(created__lte=now - timedelta(seconds=younger))
        if older is not None:
            queryset = queryset.filter(created__gt=now - timedelta(seconds=older))
        return queryset


@admin.register(LedgerEntry)
class LedgerEntryAdmin(LedgerEntryModelAdmin):
    """The request ledger: pending requests first, the *abort* action, the live "Pending requests" page."""

    list_display = (
        "request",
        "state",
        "age",
        "took",
        "method",
        "handler",
        "revision",
        "session_link",
        "caller",
        "worker_id",
    )
    """Narrow enough for a 1400 px window beside the admin's sidebars: the deadline is on each request's page,
    long values (a request id, a worker's host) are cut with their whole text in a tooltip
    (``changelist.css``), and the trace is under the request's duration (``took``)."""
    list_display_links = ("request",)
    list_filter = ("state", "method", AgeFilter)
    search_fields = (
        "request_key",
        "long_id",
        "method",
        "session__id",
        "round_of",
        "client",
        "oauth_client_id",
        "oauth_client_name",
    )
    search_help_text = "Request id, method, session id, client, or OAuth client name or id."
    readonly_fields = [
        "trace_link" if f.name == "trace_id" else f.name for f in LedgerEntry._meta.get_fields() if f.concrete
    ]
    """Every column as it is, but the trace id: linked to the trace (``TRACE_URL``)."""
    list_select_related = ("user",)
    list_deferred = ("outcome",)
    """The reply each request got: shown on its own page, never loaded for the list."""
    show_full_result_count = False
    actions = ["abort_requests"]
    live_websocket_path = LIVE_PATH
    """The live page's socket path: where the site routes :class:`.admin_live.consumer.LiveConsumer`."""

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return ThinChangeList

    def get_ordering(self, request: HttpRequest) -> Any:
        """Pending requests first, newest first within each group."""
        pending_first = Case(When(state=State.PENDING, then=Value(0)), default=Value(1))
        return [OrderBy(pending_first), "-created"]

    def get_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name
        page = LivePage(self, self.live_websocket_path)
        wrap = self.admin_site.admin_view
        return [
            path("live/", wrap(page.page), name="{}_{}_live".format(*info)),
            path("live/abort/", wrap(page.abort), name="{}_{}_live_abort".format(*info)),
            *super().get_urls(),
        ]

    @admin.display(description="request id", ordering="request_key")
    def request(self, obj: LedgerEntry) -> str:
        return _cut(repr(obj.request_id))

    @admin.display(description="name", ordering="name")
    def handler(self, obj: LedgerEntry) -> str:
        """The tool, resource or prompt; a tool's MCP Apps part beside it (a view's call, a tool with one)."""
        kind = ui_kind(obj.method, obj.name)
        if kind:
            return format_html(
                '{} <span class="mcp-ui mcp-ui-{}">{}</span>', _cut(obj.name), kind, UI_LABELS[kind]
            )
        return _cut(obj.name) if obj.name else "-"

    @admin.display(description="revision", ordering="protocol_version")
    def revision(self, obj: LedgerEntry) -> str:
        return obj.protocol_version or "-"

    @admin.display(description="user", ordering="user")
    def caller(self, obj: LedgerEntry) -> str:
        """The user; under it, the OAuth client that sent the request (its id in the tooltip), if any."""
        user = str(obj.user) if obj.user_id is not None and obj.user is not None else "-"
        if not obj.oauth_client_id:
            return user
        name = obj.oauth_client_name or obj.oauth_client_id
        return format_html(
            '{}<br><span class="mcp-cut mcp-oauth" title="OAuth client {}">via {}</span>',
            user,
            obj.oauth_client_id,
            name,
        )

    @admin.display(description="worker", ordering="worker")
    def worker_id(self, obj: LedgerEntry) -> str:
        return _cut(obj.worker)

    @admin.display(description="trace id")
    def trace_link(self, obj: LedgerEntry) -> str:
        """The whole trace id on the request's page, linked as in the list."""
        return trace_cell(obj.trace_id, obj.span_id, short=False)

    @admin.display(description="age", ordering="-created")
    def age(self, obj: LedgerEntry) -> str:
        return _duration(timezone.now() - obj.created)

    @admin.display(description="took")
    def took(self, obj: LedgerEntry) -> str:
        """How long the request took; under it, its trace (linked when ``TRACE_URL`` is set), if any."""
        took = _duration(obj.settled_at - obj.created) if obj.settled_at else "-"
        if not obj.trace_id:
            return took
        return format_html("{}<br>{}", took, trace_cell(obj.trace_id, obj.span_id))

    @admin.display(description="session", ordering="session_id")
    def session_link(self, obj: LedgerEntry) -> str:
        if not obj.session_id:
            return "-"
        url = reverse(f"{self.admin_site.name}:mcp_server_session_change", args=[obj.session_id])
        return format_html('<a href="{}" title="{}">{}…</a>', url, obj.session_id, obj.session_id[:8])

    @admin.action(description="Abort selected requests (each answers -32003)", permissions=["change"])
    def abort_requests(self, request: HttpRequest, queryset: QuerySet[LedgerEntry]) -> None:
        pks = list(queryset.filter(state=State.PENDING).values_list("pk", flat=True))
        aborted = abort_and_log(self, request, pks)
        skipped = queryset.count() - len(aborted)
        note = f"; {skipped} had already been settled" if skipped else ""
        self.message_user(request, f"Aborted {len(aborted)} request(s){note}.", messages.SUCCESS)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: LedgerEntry | None = None) -> bool:
        """Actions need the change permission; an entry itself is never edited."""
        return obj is None and super().has_change_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: LedgerEntry | None = None) -> bool:
        """A deleted pending row would leave its request unanswered; settled rows are pruned by the ledger."""
        return False


LIVE_TASKS = (Task.Status.WORKING, Task.Status.INPUT_REQUIRED)


@admin.register(Task)
class TaskAdmin(TaskModelAdmin):
    """Tasks of the tasks extension: live ones (working, input required) first, the *cancel* action."""

    list_display = ("short_id", "status", "tool", "age", "owner", "user", "server", "worker", "updated")
    list_filter = ("status", "server", "tool")
    search_fields = ("id", "tool", "owner", "worker")
    search_help_text = "Task id, tool, owner (user:<pk> or anonymous) or worker."
    readonly_fields = [f.name for f in Task._meta.get_fields() if f.concrete]
    list_select_related = ("user",)
    list_deferred = ("input_requests", "input_responses", "result", "error")
    """What the task asked, was answered and returned: shown on its own page, never loaded for the list."""
    show_full_result_count = False
    actions = ["cancel_tasks"]

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return ThinChangeList

    def get_ordering(self, request: HttpRequest) -> Any:
        """Live tasks first (working, input required), newest first within each group."""
        live_first = Case(When(status__in=LIVE_TASKS, then=Value(0)), default=Value(1))
        return [OrderBy(live_first), "-created"]

    @admin.display(description="task", ordering="id")
    def short_id(self, obj: Task) -> str:
        return f"{obj.id[:12]}…"

    @admin.display(description="age", ordering="-created")
    def age(self, obj: Task) -> str:
        return _duration(timezone.now() - obj.created)

    @admin.action(description="Cancel selected tasks", permissions=["change"])
    def cancel_tasks(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        live = {task.pk: task for task in queryset.filter(status__in=LIVE_TASKS)}
        cancelled = cancel_tasks(live)
        for task_id in cancelled:
            self.log_change(request, live[task_id], f"Cancelled the task ({TASK_CANCEL_MESSAGE}).")
        skipped = queryset.count() - len(cancelled)
        note = f"; {skipped} had already ended" if skipped else ""
        self.message_user(request, f"Cancelled {len(cancelled)} task(s){note}.", messages.SUCCESS)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Task | None = None) -> bool:
        """Actions need the change permission; a task itself is never edited."""
        return obj is None and super().has_change_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: Task | None = None) -> bool:
        """A deleted live task would leave its client polling nothing; ended ones are pruned (TTL)."""
        return False
