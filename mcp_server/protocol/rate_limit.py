"""Rate limits: a request over one of ``MCP_SERVER["RATE_LIMITS"]`` is refused before it runs.

:func:`rate_refusal` judges a request where :func:`~mcp_server.protocol.step_up.scope_refusal` does
(``serving.start_request``: both eras and stdio): the refusal is settled through the request table like any
answer, so the ledger records it once, as its own outcome, and no handler runs. A request no rule counts
costs no await and no cache call; one that rules count costs one cache round trip on Redis
(:mod:`~mcp_server.protocol.limit_counters`), bounded by ``STORE_TIMEOUT``.

A cache that cannot be reached lets the request through (``RATE_LIMIT_FAIL_OPEN``, the default) or refuses
it with ``retryAfter`` 1; either way a warning is logged at most once a minute.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from django.core.cache import caches

from ..auth.base import oauth_client_of
from ..conf import mcp_settings
from ..core.limit_rules import Rule, Window, calendar_period, compiled_rules, matching_rules
from ..core.stores import bounded
from ..wire.errors import RateLimited
from .limit_counters import count_calls, retry_after
from .task_bounds import client_address

if TYPE_CHECKING:
    from ..core.context import Context

__all__ = [
    "KEY_PREFIX",
    "Row",
    "caller_keys",
    "current_rules",
    "merge_rows",
    "rate_refusal",
    "read_rows",
    "window_key",
]

KEY_PREFIX = "mcp-rl:"
"""Every counter's cache key starts so: ``mcp-rl:<rule key>:<window>:<who>``."""

logger = logging.getLogger("mcp_server.requests")

WARN_EVERY = 60.0
"""Seconds between two warnings that the rate-limit cache cannot be reached."""

_last_warning = -WARN_EVERY


Row = tuple[str, str, bool, Rule | None]
"""An admin row as read: its ``per``, ``target``, whether it is a quota, and its rule (``None``: disabled)."""


class _Rows:
    """The admin's rows as this process last read them."""

    read_at = -float("inf")
    rows: tuple[Row, ...] = ()
    reading = False
    merged: tuple[Any, Any, tuple[Rule, ...]] = (None, None, ())
    """The settings' rules and the rows they were merged with, and the result (merged once per change)."""


def read_rows() -> tuple[Row, ...]:
    """The admin's rate limits and quotas, read now (synchronous: one query for each)."""
    from ..models import Quota, RateLimit

    out: list[Row] = []
    for model in (RateLimit, Quota):
        quota = model is Quota
        for row in model.objects.all():
            try:
                out.append((row.per, row.target, quota, row.as_rule() if row.enabled else None))
            except ValueError:  # the admin form refuses it; a row written around it is ignored
                logger.warning("the %s %r is not valid and is ignored", model._meta.verbose_name, row.name)
    return tuple(out)


def merge_rows(rules: tuple[Rule, ...], rows: tuple[Row, ...]) -> tuple[Rule, ...]:
    """``rules`` with ``rows`` over them: a row replaces the rule (or quota) with its ``per`` and
    ``target``; a disabled row removes it."""
    replaced = {(per, target, quota) for per, target, quota, _ in rows}
    kept = [r for r in rules if (r.per, r.target, r.period is not None) not in replaced]
    return (*kept, *(rule for *_, rule in rows if rule is not None))


async def _refresh_rows(every: float) -> None:
    """Read the rows again when the last read is ``every`` seconds old (one request reads; the others go
    on with the rows read before)."""
    now = time.monotonic()
    if _Rows.reading or now - _Rows.read_at < every:
        return
    _Rows.reading = True
    try:
        _Rows.rows = await bounded(sync_to_async(read_rows)(), "database")
    except Exception:  # the rows read before stay in force; reading is tried again after ``every``
        logger.debug("the rate limits of the admin could not be read", exc_info=True)
    finally:
        _Rows.read_at, _Rows.reading = time.monotonic(), False


async def current_rules() -> tuple[Rule, ...]:
    """``RATE_LIMITS`` and ``QUOTAS`` with the admin's rows over them (:func:`merge_rows`), when
    ``RATE_LIMIT_RELOAD`` is set."""
    rules = compiled_rules(mcp_settings.RATE_LIMITS, mcp_settings.QUOTAS)
    every = mcp_settings.RATE_LIMIT_RELOAD
    if every is None:
        return rules
    await _refresh_rows(float(every))
    rows = _Rows.rows
    if not rows:
        return rules
    merged_rules, merged_rows, merged = _Rows.merged
    if merged_rules is rules and merged_rows is rows:
        return merged
    merged = merge_rows(rules, rows)
    _Rows.merged = (rules, rows, merged)
    return merged


def caller_keys(ctx: Context) -> dict[str, str]:
    """Who the caller is for each ``per`` that applies to it: ``{"user": "u:5", "token": "t:3"}``, or
    ``{"address": "a:10.0.0.1"}`` for an anonymous caller (no address, as on stdio: none)."""
    keys: dict[str, str] = {}
    user = ctx.user
    if getattr(user, "is_authenticated", False) and getattr(user, "pk", None) is not None:
        keys["user"] = f"u:{user.pk}"
    auth = getattr(ctx.request, "auth", None)
    client_id, _ = oauth_client_of(auth)
    if client_id:
        keys["token"] = f"o:{client_id}"
    elif auth is not None and getattr(auth, "pk", None) is not None:
        keys["token"] = f"t:{auth.pk}"
    if "user" not in keys:
        address = client_address(ctx)
        if address:
            keys["address"] = f"a:{address}"
    return keys


def _warn(exc: BaseException) -> None:
    global _last_warning
    now = time.monotonic()
    if now - _last_warning >= WARN_EVERY:
        _last_warning = now
        opened = "let through" if mcp_settings.RATE_LIMIT_FAIL_OPEN else "refused"
        logger.warning("rate limits cannot be counted (%s): limited requests are %s", exc, opened)


async def rate_refusal(ctx: Context) -> RateLimited | None:
    """The refusal of ``ctx``'s request for a rate limit it is over, or ``None`` when it may run."""
    rules = await current_rules()
    if not rules:
        return None
    who = caller_keys(ctx)
    found = matching_rules(rules, ctx.method, ctx.params, frozenset(who))
    if not found:
        return None
    now = time.time()
    windows = [window_key(r, w, who[r.per], now) for r in found for w in r.windows]
    cache = caches[mcp_settings.RATE_LIMIT_CACHE_ALIAS]
    try:
        counts = await bounded(sync_to_async(count_calls, thread_sensitive=False)(cache, windows), "cache")
    except Exception as exc:  # StoreUnavailable (the bound), or the cache's own error
        _warn(exc)
        if mcp_settings.RATE_LIMIT_FAIL_OPEN:
            return None
        return RateLimited(mcp_settings.RATE_LIMIT_ERROR_CODE, None, None, 1)
    return _refusal(found, counts)


def window_key(rule: Rule, window: Window, who: str, now: float) -> tuple[str, int]:
    """The cache key of ``who``'s counter in ``rule``'s ``window`` and its timeout: a rate window opens
    with its first call; a quota's is the calendar period holding ``now`` (it ends when the period does)."""
    if rule.period is None:
        return f"{KEY_PREFIX}{rule.key}:{window.seconds}:{who}", window.seconds
    label, left, _ = calendar_period(rule.period, now)
    return f"{KEY_PREFIX}{rule.key}:{label}:{who}", left


def _refusal(found: list[Rule], counts: list[tuple[int, float]]) -> RateLimited | None:
    """The refusal naming the window whose wait is longest, among those over their count."""
    worst: tuple[float, Rule, Any] | None = None
    at = 0
    for rule in found:
        for window in rule.windows:
            count, left = counts[at]
            at += 1
            if count > window.count and (worst is None or left > worst[0]):
                worst = (left, rule, window)
    if worst is None:
        return None
    left, rule, window = worst
    seconds = calendar_period(rule.period, time.time())[2] if rule.period else window.seconds
    limit = {**rule.describe(), "window": window.kind, "count": window.count, "seconds": seconds}
    return RateLimited(mcp_settings.RATE_LIMIT_ERROR_CODE, rule.name, limit, retry_after(left))
