"""Leases of rate-limit counts: a worker far from a window's limit takes several of its calls at once.

Counting every call in the shared cache costs a round trip from a worker thread per limited call (~0.1 ms
of CPU with redis-py, half an echo call's whole cost). A worker instead adds ``n`` to a window's shared
count in one round trip and lets the next ``n - 1`` calls of that window through without asking: its
*lease*. The count others see includes the calls leased, so the window can never let more than its limit
through, whichever worker serves them.

The lease is sized so that it cannot refuse early where that matters: ``n`` is ``1`` (a round trip per
call, exact) until the window has more than :data:`LEASE_DIVISOR` times ``n`` calls left by the count last
seen, and at most ``RATE_LIMIT_LEASE``. So a limit of up to 256 calls is counted call by call; a large one
(10,000 an hour) is leased in pieces of up to 64 while it has thousands to go and call by call near its
end. What a lease costs: calls leased by a worker that then gets no more calls of that window are counted
but never made, at most ``1/256`` of the calls left when it leased, per worker; the window may then refuse
that many calls early. A lease ends with a margin before its window does (a call is never let through on
a window that has expired in the cache), and whatever is left of it is dropped.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from dataclasses import dataclass

__all__ = ["LEASE_DIVISOR", "Lease", "Leases"]

LEASE_DIVISOR = 256
"""A lease of ``n`` calls is taken only while the window has more than this many times ``n`` left."""

MAX_HELD = 10_000
"""At most this many windows' leases are kept per process (the oldest forgotten first)."""


@dataclass
class Lease:
    """Calls of one window this process may still let through without asking."""

    left: int
    ends: float
    """``time.monotonic()`` past which the lease is void (before the window's counter expires)."""
    count: int
    """The window's shared count as last seen (it sizes the next lease)."""
    size: int = 1
    """How many calls the last round trip asked for."""


class Leases:
    """The leases this process holds, by the cache key of their window."""

    def __init__(self, most_held: int = MAX_HELD) -> None:
        self._held: OrderedDict[str, Lease] = OrderedDict()
        self._most_held = most_held
        self._asking: dict[str, asyncio.Future[None]] = {}
        """The round trips in flight, by window: a call that finds its lease empty waits for the one already
        asking instead of asking too (sixteen calls at once would otherwise each take a lease)."""

    def in_flight(self, keys: list[str]) -> list[asyncio.Future[None]]:
        """The round trips in flight for any of ``keys`` (on this event loop)."""
        loop = asyncio.get_running_loop()
        out = []
        for key in keys:
            future = self._asking.get(key)
            if future is not None and not future.done() and future.get_loop() is loop:
                out.append(future)
        return out

    def asking(self, keys: list[str]) -> asyncio.Future[None]:
        """Mark a round trip for ``keys`` in flight; resolve the future it returns when it is done."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for key in keys:
            self._asking[key] = future
        return future

    def asked(self, keys: list[str], future: asyncio.Future[None]) -> None:
        """The round trip of :meth:`asking` is over (answered or failed): wake whoever waits on it."""
        for key in keys:
            if self._asking.get(key) is future:
                del self._asking[key]
        if not future.done():
            future.set_result(None)

    def __len__(self) -> int:
        return len(self._held)

    def take(self, key: str, now: float | None = None) -> int | None:
        """Take one call of ``key``'s lease: how many are left after it, or ``None`` when there was none
        (ask the cache)."""
        lease = self._held.get(key)
        if lease is None or lease.left <= 0:
            return None
        if (time.monotonic() if now is None else now) >= lease.ends:
            lease.left = 0
            return None
        lease.left -= 1
        return lease.left

    def size(self, key: str, limit: int, most: int) -> int:
        """How many calls of ``key`` to add at its next round trip (1 until its last seen count leaves more
        than :data:`LEASE_DIVISOR` times more, at most ``most``)."""
        lease = self._held.get(key)
        if lease is None or most <= 1:
            return 1
        return max(1, min(most, (limit - lease.count) // LEASE_DIVISOR))

    def running_low(self, key: str, left: int) -> bool:
        """Whether ``key``'s lease, ``left`` calls of it left, is down to its last quarter (or call) with no
        round trip in flight: time to ask for the next one ahead, so that no call waits for it."""
        lease = self._held.get(key)
        if lease is None or lease.size <= 1 or left > max(1, lease.size // 4):
            return False
        future = self._asking.get(key)
        return future is None or future.done()

    def granted(
        self,
        key: str,
        asked: int,
        count: int,
        limit: int,
        seconds_left: float,
        now: float | None = None,
        *,
        calls: int = 1,
    ) -> bool:
        """Keep what a round trip that added ``asked`` calls (``count``: the shared count after it) leaves
        under ``limit``: whether the ``calls`` that asked (1, or 0 for a lease asked ahead) may run, and the
        rest as the lease."""
        fits = min(asked, limit - (count - asked))  # the calls added that are within the limit
        now = time.monotonic() if now is None else now
        ends = now + seconds_left - min(1.0, seconds_left / 10)
        held = self._held.get(key)
        kept = held.left if held is not None and held.left > 0 and now < held.ends else 0
        lease = Lease(kept + max(0, fits - calls), ends, count, asked)  # what another asked stays too
        self._held[key] = lease
        self._held.move_to_end(key)
        while len(self._held) > self._most_held:
            self._held.popitem(last=False)
        return fits >= calls
