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

import asyncio
import functools
import logging
import time
import weakref
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async

from ..auth.base import oauth_client_of
from ..conf import mcp_settings, process_cache
from ..core.limit_rules import Rule, Window, calendar_period, compiled_rules, matching_rules
from ..core.stores import bounded
from ..wire.errors import RateLimited
from .limit_counters import acount_redis, async_redis_client, count_calls, retry_after
from .limit_leases import Leases
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
    if auth is not None:
        client_id, _ = oauth_client_of(auth)
        if client_id:
            keys["token"] = f"o:{client_id}"
        elif getattr(auth, "pk", None) is not None:
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
    found = _Matched.rules_for(rules, ctx.method, ctx.params, tuple(who))
    if not found:
        return None
    now = time.time()
    limited = [(w, window_key(r, w, who[r.per], now)) for r in found for w in r.windows]
    leases = _Leased.leases
    asking: list[int] = []
    low: list[tuple[Window, tuple[str, int]]] = []
    for at, entry in enumerate(limited):
        left = leases.take(entry[1][0])
        if left is None:
            asking.append(at)
        elif leases.running_low(entry[1][0], left):
            low.append(entry)
    if low:
        keys = [key for _, (key, _) in low]
        future = leases.asking(keys)  # in flight from now on
        _Leased.ahead(_ask_ahead(leases, low, future), lambda _: leases.asked(keys, future))
    if not asking:  # every window leased: within each
        return None
    counts: list[tuple[int, float]] = [(0, 0.0)] * len(limited)  # a leased call is within its window
    try:
        await _ask(limited, asking, counts)
    except Exception as exc:  # StoreUnavailable (the bound), or the cache's own error
        _warn(exc)
        if mcp_settings.RATE_LIMIT_FAIL_OPEN:
            return None
        return RateLimited(mcp_settings.RATE_LIMIT_ERROR_CODE, None, None, 1)
    return _refusal(found, counts)


class _Matched:
    """Which rules count a request, kept by what decides it (its method, the name or URI it names, and
    who its caller is) while the rules stay the same: matching the rules' globs was a third of a limited
    call's cost. At most :data:`MATCHES_KEPT` answers are kept (names a client makes up start it afresh)."""

    rules: tuple[Rule, ...] | None = None
    found: dict[tuple[str, Any, tuple[str, ...]], list[Rule]] = {}

    @classmethod
    def rules_for(
        cls, rules: tuple[Rule, ...], method: str, params: dict[str, Any], pers: tuple[str, ...]
    ) -> list[Rule]:
        """The rules that count the request (``pers``: the kinds of who its caller is, in
        :func:`caller_keys`' order)."""
        if cls.rules is not rules:
            cls.rules, cls.found = rules, {}
        named = params.get("uri") if method.startswith("resources/") else params.get("name")
        if isinstance(named, str) and len(named) > NAME_KEPT:  # not kept: matched every time
            return matching_rules(rules, method, params, frozenset(pers))
        key = (method, named if isinstance(named, str) else None, pers)
        found = cls.found.get(key)
        if found is None:
            found = matching_rules(rules, method, params, frozenset(pers))
            if len(cls.found) >= MATCHES_KEPT:
                cls.found = {}
            cls.found[key] = found
        return found


MATCHES_KEPT = 4096
NAME_KEPT = 256
"""A name or URI longer than this is matched anew each time, never kept."""


class _Leased:
    """The leases of this process (:mod:`~mcp_server.protocol.limit_leases`) and the round trips that
    ask for the next ones ahead."""

    leases = Leases()
    asking_ahead: set[asyncio.Task[None]] = set()
    redis: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[Any, Any]] = weakref.WeakKeyDictionary()
    """Per event loop: the cache it was made for and its ``redis.asyncio`` client (``None``: not Redis)."""

    @classmethod
    async def count(cls, windows: list[tuple[str, int]], amounts: list[int]) -> list[tuple[int, float]]:
        """Count in the rate-limit cache: on the loop for Redis, in a worker thread for any other cache
        (bounded by ``STORE_TIMEOUT`` either way)."""
        cache = process_cache(mcp_settings.RATE_LIMIT_CACHE_ALIAS)
        loop = asyncio.get_running_loop()
        made = cls.redis.get(loop)
        if made is None or made[0] is not cache:
            made = cls.redis[loop] = (cache, async_redis_client(cache))
        if made[1] is not None:
            client, make_key = made[1]
            return await bounded(acount_redis(client, make_key, windows, amounts), "cache")
        count = sync_to_async(count_calls, thread_sensitive=False)
        return await bounded(count(cache, windows, amounts), "cache")

    @classmethod
    def ahead(cls, coroutine: Coroutine[Any, Any, None], done: Callable[[Any], None]) -> None:
        """Run ``coroutine`` on its own; ``done`` when it ends, however (even cancelled unstarted)."""
        task = asyncio.get_running_loop().create_task(coroutine)
        cls.asking_ahead.add(task)
        task.add_done_callback(cls.asking_ahead.discard)
        task.add_done_callback(done)


async def _leased_counts(
    leases: Leases, entries: list[tuple[Window, tuple[str, int]]], calls: int
) -> list[tuple[bool, int, float]]:
    """Count ``entries`` in the cache, each with the lease its last count allows, and keep what fits under
    each window as its lease: per entry, whether the ``calls`` that asked (1, or 0 ahead of need) may run,
    the shared count, and the seconds its window has left."""
    most = mcp_settings.RATE_LIMIT_LEASE
    amounts = [leases.size(key, window.count, most) for window, (key, _) in entries]
    answers = await _Leased.count([entry[1] for entry in entries], amounts)
    return [
        (leases.granted(key, amount, count, window.count, left, calls=calls), count, left)
        for (window, (key, _)), amount, (count, left) in zip(entries, amounts, answers, strict=True)
    ]


async def _ask_ahead(
    leases: Leases, low: list[tuple[Window, tuple[str, int]]], future: asyncio.Future[None]
) -> None:
    """Ask for the next leases of ``low`` before they run out (no call waits for it; a failure is left to
    the next call that finds its lease empty, which asks and answers for it). Its task's end resolves
    ``future``: whoever waits on it finds the lease."""
    try:
        await _leased_counts(leases, low, calls=0)
    except Exception:
        logger.debug("a rate-limit lease could not be asked for ahead", exc_info=True)


async def _ask(
    limited: list[tuple[Window, tuple[str, int]]], asking: list[int], counts: list[tuple[int, float]]
) -> None:
    """Count the windows at ``asking`` in the cache, each with the lease its last count allows; fill in
    their ``counts`` (over its limit: a count above it)."""
    leases = _Leased.leases
    flying = leases.in_flight([limited[at][1][0] for at in asking])
    if flying:  # another call is asking for these windows: its lease may cover this one too
        await asyncio.wait(flying, timeout=mcp_settings.STORE_TIMEOUT)  # (each is bounded by it too)
        asking = [at for at in asking if leases.take(limited[at][1][0]) is None]
        if not asking:
            return
    keys = [limited[at][1][0] for at in asking]
    future = leases.asking(keys)
    try:
        answers = await _leased_counts(leases, [limited[at] for at in asking], calls=1)
    finally:
        leases.asked(keys, future)
    for at, (fits, count, left) in zip(asking, answers, strict=True):
        counts[at] = (0 if fits else max(count, limited[at][0].count + 1), left)


def window_key(rule: Rule, window: Window, who: str, now: float) -> tuple[str, int]:
    """The cache key of ``who``'s counter in ``rule``'s ``window`` and its timeout: a rate window opens
    with its first call; a quota's is the calendar period holding ``now`` (it ends when the period does)."""
    if rule.period is None:
        return _window_prefix(rule.key, window.seconds) + who, window.seconds
    label, left, _ = calendar_period(rule.period, now)
    return f"{KEY_PREFIX}{rule.key}:{label}:{who}", left


@functools.lru_cache(maxsize=1024)
def _window_prefix(rule_key: str, seconds: int) -> str:
    return f"{KEY_PREFIX}{rule_key}:{seconds}:"


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
