"""The rate-limit and quota counters as they stand in the cache, for the admin's usage page.

Read only when an operator opens that page, never on the request path: on Redis one ``SCAN`` of the
counters' keys (at most :data:`MAX_COUNTERS`) and one pipelined round trip for their counts and time left;
on the local-memory cache, this process's keys (counts per process). Other caches cannot list their keys:
:func:`read_usage` says so with ``None``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ..core.limit_rules import Rule, Window
from .limit_counters import redis_client
from .rate_limit import KEY_PREFIX

__all__ = ["MAX_COUNTERS", "Usage", "read_usage"]

MAX_COUNTERS = 2000
"""At most this many counters are read for one page (the page says when there were more)."""


@dataclass(frozen=True)
class Usage:
    """One caller's count in one window of one rule."""

    rule_key: str
    window: str
    """The window's length in seconds (a rate rule), or the calendar period (a quota: ``2026-07-28``)."""
    who: str
    """``u:<user pk>``, ``t:<token pk>``, ``o:<OAuth client id>`` or ``a:<address>``."""
    count: int
    """Calls counted, refused ones included."""
    seconds_left: float | None
    rule: Rule | None
    """The rule in force with that key (``None``: no rule in force has it any more)."""
    limit: Window | None

    @property
    def refused(self) -> bool:
        """Whether the caller is over this window's count: it is being refused now."""
        return self.limit is not None and self.count > self.limit.count


def _window(rule: Rule | None, window: str) -> Window | None:
    if rule is None:
        return None
    if rule.period is not None:
        return rule.windows[0]
    return next((w for w in rule.windows if str(w.seconds) == window), None)


def _usage(key: str, count: int, left: float | None, rules: dict[str, Rule]) -> Usage | None:
    parts = key[len(KEY_PREFIX) :].split(":", 2)
    if len(parts) != 3:
        return None
    rule = rules.get(parts[0])
    return Usage(parts[0], parts[1], parts[2], count, left, rule, _window(rule, parts[1]))


def _read_redis(client: Any, prefix: str) -> tuple[list[tuple[str, int, float | None]], bool]:
    keys: list[bytes] = []
    for key in client.scan_iter(match=f"{prefix}{KEY_PREFIX}*", count=500):
        if len(keys) == MAX_COUNTERS:
            return _redis_counts(client, prefix, keys), True
        keys.append(key)
    return _redis_counts(client, prefix, keys), False


def _redis_counts(client: Any, prefix: str, keys: list[bytes]) -> list[tuple[str, int, float | None]]:
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.get(key)
        pipe.pttl(key)
    replies = pipe.execute()
    out = []
    for i, key in enumerate(keys):
        value, left_ms = replies[2 * i], replies[2 * i + 1]
        if value is None or not value.isdigit():
            continue
        out.append((key.decode()[len(prefix) :], int(value), left_ms / 1000 if left_ms >= 0 else None))
    return out


def _read_locmem(cache: Any, prefix: str) -> tuple[list[tuple[str, int, float | None]], bool]:
    with cache._lock:
        made = [k for k in cache._cache if k.startswith(prefix + KEY_PREFIX) and not k.endswith(":end")]
    out = []
    for made_key in made[:MAX_COUNTERS]:
        key = made_key[len(prefix) :]
        count = cache.get(key)
        if not isinstance(count, int):
            continue
        end = cache.get(f"{key}:end")
        out.append((key, count, max(0.0, end - time.time()) if isinstance(end, float) else None))
    return out, len(made) > MAX_COUNTERS


def read_usage(cache: Any, rules: tuple[Rule, ...]) -> tuple[list[Usage], bool] | None:
    """Every counter in ``cache`` (those refused now first, then the highest counts), and whether there
    were more than :data:`MAX_COUNTERS`; ``None`` when this cache cannot list its keys.

    Synchronous (a cache client's calls): the admin's view calls it.
    """
    prefix = cache.make_key("")
    redis = redis_client(cache)
    if redis is not None:
        raw, more = _read_redis(redis[0], prefix)
    elif type(cache).__module__ == "django.core.cache.backends.locmem":
        raw, more = _read_locmem(cache, prefix)
    else:
        return None
    by_key = {rule.key: rule for rule in rules}
    found = [u for key, count, left in raw if (u := _usage(key, count, left, by_key)) is not None]
    found.sort(key=lambda u: (not u.refused, -u.count, u.rule_key, u.who))
    return found, more
