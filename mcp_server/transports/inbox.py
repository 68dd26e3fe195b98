"""What a POST's exchange waits on: the items its requests hand over, in order, with one waiter.

An ``asyncio.Queue`` would do, at the cost of what it carries for many producers and consumers (an
``Event`` built with each queue, a deque of getters, a future per wait). An exchange has one reader, and
most POSTs carry one request whose answer is the only item: this holds the items in a deque and, only when
the reader finds none, one future it waits on.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Generic, TypeVar

__all__ = ["Inbox"]

T = TypeVar("T")


class Inbox(Generic[T]):
    """A first-in first-out box with one reader: ``put_nowait`` from anywhere on the loop, ``get`` to wait."""

    __slots__ = ("_items", "_waiter")

    def __init__(self) -> None:
        self._items: deque[T] = deque()
        self._waiter: asyncio.Future[None] | None = None

    def put_nowait(self, item: T) -> None:
        """Add ``item``; the reader waiting for one wakes."""
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def empty(self) -> bool:
        """Whether no item is waiting to be read."""
        return not self._items

    async def get(self) -> T:
        """The oldest item, waiting for one when there is none (one reader at a time)."""
        while not self._items:
            waiter = self._waiter = asyncio.get_running_loop().create_future()
            try:
                await waiter
            finally:
                self._waiter = None
        return self._items.popleft()
