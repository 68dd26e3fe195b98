"""Admin of the rate limits and quotas, and the page of their current usage.

Staff change *Rate limits* and *Quotas* rows live: each worker applies a change within
``RATE_LIMIT_RELOAD`` seconds. The forms refuse zero, negative or absurd values (``clean`` of each model).
*Current usage* (``ratelimit/usage/``) lists every counter the cache holds, who is being refused now first:
each caller's count against each limit in force and the time its window has left, read from the cache
(:mod:`~mcp_server.protocol.limit_usage`) only when the page is opened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.core.cache import caches
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path

from .auth.models import AccessToken
from .conf import mcp_settings
from .core.limit_rules import Rule, compiled_rules
from .models import Quota, RateLimit
from .protocol.limit_usage import Usage, read_usage
from .protocol.rate_limit import merge_rows, read_rows

__all__ = ["NOT_READ", "QuotaAdmin", "RateLimitAdmin", "rules_in_force", "usage_rows", "warn_unless_read"]

if TYPE_CHECKING:
    RateLimitModelAdmin = admin.ModelAdmin[RateLimit]
    QuotaModelAdmin = admin.ModelAdmin[Quota]
else:
    RateLimitModelAdmin = admin.ModelAdmin
    QuotaModelAdmin = admin.ModelAdmin


def rules_in_force() -> tuple[Rule, ...]:
    """``RATE_LIMITS`` and ``QUOTAS``, with the admin's rows over them when ``RATE_LIMIT_RELOAD`` is set
    (what every worker applies once it has read the rows again)."""
    rules = compiled_rules(mcp_settings.RATE_LIMITS, mcp_settings.QUOTAS)
    if mcp_settings.RATE_LIMIT_RELOAD is None:
        return rules
    return merge_rows(rules, read_rows())


def _callers(found: list[Usage]) -> dict[str, str]:
    """A readable name for each ``who`` (one query for the users, one for the tokens)."""
    ids: dict[str, set[str]] = {"u": set(), "t": set()}
    for usage in found:
        kind, _, ident = usage.who.partition(":")
        if kind in ids:
            ids[kind].add(ident)
    names: dict[str, str] = {}
    if ids["u"]:
        users = get_user_model()._default_manager.filter(pk__in=ids["u"])
        names.update({f"u:{u.pk}": f"user {u.get_username()}" for u in users})
    if ids["t"]:
        tokens = AccessToken.objects.filter(pk__in=ids["t"]).select_related("user")
        names.update({f"t:{t.pk}": f"token {t.name or t.prefix} ({t.user.get_username()})" for t in tokens})
    return names


def _label(who: str, names: dict[str, str]) -> str:
    kind, _, ident = who.partition(":")
    default = {"u": f"user #{ident}", "t": f"token #{ident}", "o": f"OAuth client {ident}"}
    return names.get(who) or default.get(kind, f"address {ident}")


def usage_rows() -> tuple[list[dict[str, Any]], bool, bool]:
    """``(rows, more, listable)`` for the usage page: one row per counter, refused now first."""
    read = read_usage(caches[mcp_settings.RATE_LIMIT_CACHE_ALIAS], rules_in_force())
    if read is None:
        return [], False, False
    found, more = read
    names = _callers(found)
    rows = []
    for usage in found:
        rule, window = usage.rule, usage.limit
        rows.append(
            {
                "who": _label(usage.who, names),
                "limit": rule.name if rule is not None else f"(a rule no longer in force: {usage.rule_key})",
                "window": window.kind if window is not None else usage.window,
                "period": usage.window if rule is not None and rule.period else f"{usage.window} s",
                "count": usage.count,
                "of": window.count if window is not None else None,
                "left": None if usage.seconds_left is None else round(usage.seconds_left),
                "refused": usage.refused,
            }
        )
    return rows, more, True


NOT_READ = (
    "MCP_SERVER['RATE_LIMIT_RELOAD'] is None: the workers do not read these rows. Set it (e.g. 5.0 seconds) "
    "for the rows to apply."
)
"""What the rows' change lists say while the rows are not read."""


def warn_unless_read(request: HttpRequest) -> None:
    """Tell staff, on a change list of rows, that no worker reads them (``RATE_LIMIT_RELOAD`` is ``None``)."""
    if mcp_settings.RATE_LIMIT_RELOAD is None and request.method == "GET":
        messages.warning(request, NOT_READ)


@admin.register(RateLimit)
class RateLimitAdmin(RateLimitModelAdmin):
    """Rate limits staff change live: each worker applies a change within ``RATE_LIMIT_RELOAD`` seconds.
    The form refuses a zero, negative or absurd rate or burst (``RateLimit.clean``); *Current usage* shows
    every caller's count against each limit and who is being refused now."""

    list_display = ("name", "per", "target", "rate", "burst", "enabled", "updated")
    fields = ("name", "per", "target", "rate", "burst", "enabled")
    list_filter = ("per", "enabled")
    search_fields = ("name", "target")
    change_list_template = "admin/mcp_server/ratelimit/change_list.html"

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        warn_unless_read(request)
        return super().changelist_view(request, extra_context)

    def get_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name
        usage = self.admin_site.admin_view(self.usage_view)
        return [path("usage/", usage, name="{}_{}_usage".format(*info)), *super().get_urls()]

    def usage_view(self, request: HttpRequest) -> HttpResponse:
        """The counters in the cache now (read-only; anyone who may view the rate limits may see it)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        rows, more, listable = usage_rows()
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Rate limits and quotas: current usage",
            "rows": rows,
            "refused": sum(1 for row in rows if row["refused"]),
            "more": more,
            "listable": listable,
            "cache_alias": mcp_settings.RATE_LIMIT_CACHE_ALIAS,
            "reload": mcp_settings.RATE_LIMIT_RELOAD,
        }
        return TemplateResponse(request, "admin/mcp_server/ratelimit/usage.html", context)


@admin.register(Quota)
class QuotaAdmin(QuotaModelAdmin):
    """Daily or monthly quotas staff change live, like the rate limits (``Quota.clean`` refuses a zero or
    absurd quota)."""

    list_display = ("name", "per", "target", "quota", "period", "enabled", "updated")
    fields = ("name", "per", "target", "quota", "period", "enabled")
    list_filter = ("per", "period", "enabled")
    search_fields = ("name", "target")

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        warn_unless_read(request)
        return super().changelist_view(request, extra_context)
