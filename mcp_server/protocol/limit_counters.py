"""Rate-limit counters in the Django cache: fixed windows that the cache itself opens and expires.

A window is one cache key: its first call creates it with the window's length as its timeout, every call
increments it, and it disappears when the cache expires it. No worker's clock decides where a window starts
or ends, so workers whose clocks disagree cannot let a burst through; the count is the cache's, so every
worker on one cache shares it.

- On Redis (Django's ``RedisCache``) every counter of a call is updated
  in one ``MULTI``/``EXEC`` transaction, one round trip: ``SET key 0 EX seconds NX``, ``INCR key``,
  ``PTTL key`` (the time left, for ``retryAfter``). Exact under any concurrency, no Lua.
- Any other cache (the local-memory cache: one process, so counts are per process) uses ``cache.add`` and
  ``cache.incr``, atomic in that cache; the window's end is kept next to it for ``retryAfter``.

An attempt that is refused still counts in every window of its rule (one round trip, never a second to
take it back): a caller that keeps calling while told to wait uses up its longer window too.
"""

from __future__ import annotations

import math
import time
from typing import Any

__all__ = ["count_calls", "redis_client", "retry_after"]


def redis_client(cache: Any) -> tuple[Any, Any] | None:
    """``(redis client, make_key)`` of Django's ``RedisCache`` (its writes go to its first server), or
    ``None`` for any other cache."""
    if type(cache).__module__ != "django.core.cache.backends.redis":
        return None
    return cache._cache.get_client(None, write=True), cache.make_and_validate_key


def _count_redis(client: Any, make_key: Any, windows: list[tuple[str, int]]) -> list[tuple[int, float]]:
    pipe = client.pipeline(transaction=True)
    keys = [make_key(key) for key, _ in windows]
    for key, (_, seconds) in zip(keys, windows, strict=True):
        pipe.set(key, 0, ex=seconds, nx=True)
        pipe.incr(key)
        pipe.pttl(key)
    replies = pipe.execute()
    out = []
    for i, (_, seconds) in enumerate(windows):
        count, left_ms = int(replies[3 * i + 1]), int(replies[3 * i + 2])
        out.append((count, left_ms / 1000 if left_ms >= 0 else float(seconds)))
    return out


def _count_generic(cache: Any, windows: list[tuple[str, int]]) -> list[tuple[int, float]]:
    out = []
    for key, seconds in windows:
        for _attempt in range(3):
            if cache.add(key, 0, seconds):
                cache.set(f"{key}:end", time.time() + seconds, seconds)
            try:
                count = int(cache.incr(key))
                break
            except ValueError:  # it expired between add and incr: open the next window
                continue
        else:  # pragma: no cover - three windows expired in a row
            raise RuntimeError(f"the rate-limit counter {key!r} cannot be kept")
        end = cache.get(f"{key}:end")
        left = end - time.time() if isinstance(end, float) else float(seconds)
        out.append((count, max(0.0, left)))
    return out


def count_calls(cache: Any, windows: list[tuple[str, int]]) -> list[tuple[int, float]]:
    """Count one call in each ``(key, seconds)`` window; ``(count including it, seconds left)`` of each.

    Synchronous (a cache client's call): run it in a thread, bounded by ``STORE_TIMEOUT``.
    """
    redis = redis_client(cache)
    if redis is not None:
        return _count_redis(redis[0], redis[1], windows)
    return _count_generic(cache, windows)


def retry_after(seconds_left: float) -> int:
    """Whole seconds to wait (at least 1)."""
    return max(1, math.ceil(seconds_left))
