"""A worker's runtime for tests that drive the consumer in process: the cache ledger, the in-memory channel
layer, closed after the test."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from mcp_server.runtime import Runtime
from mcp_server.stores.ledger.cache import CacheLedger

__all__ = ["in_memory_runtime"]


@contextlib.asynccontextmanager
async def in_memory_runtime(settings: Any, worker_id: str) -> AsyncIterator[Runtime]:
    """A runtime named ``worker_id`` on the cache ledger and the in-memory channel layer (set in ``settings``,
    pytest-django's fixture), closed on the way out."""
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    runtime = Runtime(
        worker_id=worker_id, ledger=CacheLedger({"RETENTION": 60}), channel_layer_alias="default"
    )
    try:
        yield runtime
    finally:
        await runtime.aclose()
