"""The admin's "Pending requests" page and its abort endpoint, mounted by ``LedgerEntryAdmin.get_urls``."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, JsonResponse
from django.template.response import TemplateResponse
from django.urls import reverse

from ..ledger import LedgerRecord, State
from ..models import LedgerEntry
from ..wire.errors import REQUEST_ABORTED
from .operations import ABORT_MESSAGE, abort_requests

if TYPE_CHECKING:
    from django.contrib.admin import ModelAdmin

__all__ = ["LivePage", "abort_and_log", "log_abort"]


def log_abort(model_admin: ModelAdmin[Any], request: HttpRequest, record: LedgerRecord) -> None:
    """Record an abort in the admin log (works for any ledger backend: the entry need not be a row)."""
    entry = LedgerEntry(
        pk=record.pk,
        session_id=record.session_id,
        request_key=record.request_key,
        method=record.method,
        name=record.name,
        state=State.ABORTED,
    )
    what = f"{record.method} {record.name}".strip()
    model_admin.log_change(
        request,
        entry,
        f"Aborted request {json.dumps(record.request_id)} ({what}) of session {record.session_id or '-'}: "
        f"answered {REQUEST_ABORTED} {ABORT_MESSAGE!r}.",
    )


def abort_and_log(model_admin: ModelAdmin[Any], request: HttpRequest, pks: Iterable[Any]) -> list[Any]:
    """Abort the pending requests among ``pks``, log each in the admin log; returns the aborted pks."""
    aborted = abort_requests(pks)
    for record in aborted:
        log_abort(model_admin, request, record)
    return [record.pk for record in aborted]


class LivePage:
    """Views of one ``LedgerEntry`` model admin: the live page and the endpoint its abort button posts to."""

    template_name = "admin/mcp_server/ledgerentry/live.html"

    def __init__(self, model_admin: ModelAdmin[Any], websocket_path: str) -> None:
        self.model_admin = model_admin
        self.websocket_path = websocket_path

    def _url(self, name: str, *args: Any) -> str:
        opts = self.model_admin.opts
        site = self.model_admin.admin_site.name
        return reverse(f"{site}:{opts.app_label}_{opts.model_name}_{name}", args=args)

    def page(self, request: HttpRequest) -> HttpResponse:
        """The page: filled and kept current by ``mcp_server/live.js`` over the WebSocket."""
        admin = self.model_admin
        if not admin.has_view_permission(request):
            raise PermissionDenied
        site = admin.admin_site.name
        context = {
            **admin.admin_site.each_context(request),
            "title": "Pending requests",
            "opts": admin.opts,
            "app_label": admin.opts.app_label,
            "websocket_path": "/" + self.websocket_path.lstrip("/"),
            "abort_url": self._url("live_abort"),
            "changelist_url": self._url("changelist"),
            "entry_url": self._url("change", "__pk__"),
            "session_url": reverse(f"{site}:mcp_server_session_change", args=["__id__"]),
            "can_abort": admin.has_change_permission(request),
        }
        request.current_app = site
        return TemplateResponse(request, self.template_name, context)

    def abort(self, request: HttpRequest) -> HttpResponse:
        """POST ``pk`` (repeated): abort those requests; answers ``{"aborted": [...], "skipped": [...]}``."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.model_admin.has_change_permission(request):
            raise PermissionDenied
        pks = [int(pk) for pk in request.POST.getlist("pk") if pk.isdigit()]
        aborted = abort_and_log(self.model_admin, request, pks)
        return JsonResponse({"aborted": aborted, "skipped": [pk for pk in pks if pk not in aborted]})
