"""The stdio transport's pipes: newline-delimited lines in (:func:`read_lines`, a reader thread) and one
compact JSON message per line out (:class:`LineWriter`, a writer thread), each off the event loop.

:mod:`~mcp_server.transports.stdio` serves the session over them (and gives these names too).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import IO

__all__ = ["EOF", "TOO_LONG", "Line", "LineWriter", "Marker", "read_lines"]

logger = logging.getLogger("mcp_server.stdio")


class Marker(enum.Enum):
    """Items of the line queue besides lines."""

    EOF = "end of input"
    TOO_LONG = "a line longer than the limit"


EOF = Marker.EOF
TOO_LONG = Marker.TOO_LONG
Line = bytes | Marker


def read_lines(fd: int, loop: asyncio.AbstractEventLoop, limit: int) -> asyncio.Queue[Line]:
    """Read ``fd`` in a daemon thread; complete lines (without the newline) arrive on the returned queue.

    The queue is bounded, so a client that writes faster than the server reads is held back by the pipe.
    A line longer than ``limit`` bytes is discarded and reported as ``TOO_LONG``; end of input as ``EOF``.
    """
    queue: asyncio.Queue[Line] = asyncio.Queue(maxsize=64)

    def put(item: Line) -> bool:
        try:
            asyncio.run_coroutine_threadsafe(queue.put(item), loop).result()
        except (RuntimeError, asyncio.CancelledError):  # the loop has gone away
            return False
        return True

    def pump() -> None:
        buffer = bytearray()
        skipping = False
        try:
            while chunk := os.read(fd, 65536):
                buffer += chunk
                while (end := buffer.find(b"\n")) >= 0:
                    line, buffer = bytes(buffer[:end]), buffer[end + 1 :]
                    if skipping:
                        skipping = False
                    elif line.strip() and not put(line if len(line) <= limit else TOO_LONG):
                        return
                if len(buffer) > limit:
                    buffer.clear()
                    if not skipping and not put(TOO_LONG):
                        return
                    skipping = True
        except OSError as exc:
            logger.warning("reading the protocol input failed: %s", exc)
        if buffer.strip() and not skipping and not put(bytes(buffer)):
            return
        put(EOF)

    threading.Thread(target=pump, name="mcp-stdin", daemon=True).start()
    return queue


class LineWriter:
    """Writes one compact JSON message per line, one message at a time, off the event loop.

    The first write that fails calls ``on_broken`` (the session then winds down: nobody hears it).
    """

    def __init__(self, output: IO[bytes], on_broken: Callable[[], None] | None = None) -> None:
        self.output = output
        self.broken = False
        self._on_broken = on_broken
        self._lock = asyncio.Lock()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-stdout")

    async def write(self, message: bytes) -> bool:
        """Send one encoded message as a line; ``False`` when the output is gone (nobody reads it)."""
        data = message + b"\n"
        async with self._lock:
            if self.broken:
                return False
            try:
                await asyncio.get_running_loop().run_in_executor(self._executor, self._write, data)
            except (OSError, ValueError) as exc:
                self.broken = True
                logger.warning("the protocol output is gone (%s); further messages are dropped", exc)
                if self._on_broken is not None:
                    self._on_broken()
                return False
        return True

    def _write(self, data: bytes) -> None:
        self.output.write(data)
        self.output.flush()

    def close(self) -> None:
        """Release the writer thread (a write stuck on a full pipe is abandoned)."""
        self._executor.shutdown(wait=False, cancel_futures=True)
