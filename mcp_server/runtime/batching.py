"""The background loop the ledger writer and the event writer share: woken by a queued write, it flushes
every ``interval`` seconds from one thread of the writer's own, retrying with backoff
while the store fails."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import ClassVar

__all__ = ["MAX_BACKOFF", "MIN_BACKOFF", "BatchLoop"]

MAX_BACKOFF = 5.0
"""Longest wait, in seconds, before a failed flush is tried again."""
MIN_BACKOFF = 0.01


class BatchLoop:
    """Subclasses say what they write (``what``, ``items``, ``logger``) and implement ``flush`` and
    ``__len__``."""

    what: ClassVar[str] = "batch"
    """Names the loop's task and thread, and its log lines ("<what> write failed")."""
    items: ClassVar[str] = "records"
    logger: ClassVar[logging.Logger] = logging.getLogger("mcp_server.ledger")

    def __init__(self, interval: float) -> None:
        self.interval = max(0.0, float(interval))
        self._work = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._executor = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"mcp-{self.what.replace(' ', '-')}-writer"
        )
        self.failures = 0
        """Consecutive failed flushes (0 when the store answers)."""
        self._closed = False

    def __len__(self) -> int:
        raise NotImplementedError

    async def flush(self) -> None:
        """Write everything queued so far (the store's errors propagate; what failed stays queued)."""
        raise NotImplementedError

    def _wake(self) -> None:
        if self._closed:  # a write landing after the close: nothing is written any more
            return
        self._work.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"mcp {self.what} writer")

    async def _run(self) -> None:
        while True:
            await self._work.wait()
            await asyncio.sleep(self.interval)
            self._work.clear()
            try:
                await self.flush()
            except asyncio.CancelledError:
                raise
            except Exception:
                self.failures += 1
                delay = min(MAX_BACKOFF, max(self.interval, MIN_BACKOFF) * 2**self.failures)
                self.logger.exception(
                    "%s write failed (%d in a row); retrying in %.2fs", self.what, self.failures, delay
                )
                self._work.set()
                await asyncio.sleep(delay)
            else:
                self.failures = 0

    async def aclose(self, grace: float = 5.0) -> None:
        """Flush what is queued (within ``grace`` seconds) and stop the background loop."""
        try:
            async with asyncio.timeout(grace):
                await self.flush()
        except Exception:
            self.logger.exception("%s %s lost at shutdown: %d", self.what, self.items, len(self))
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._executor.shutdown(wait=False)
