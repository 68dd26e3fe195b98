"""The Django-style middleware chain around dispatch, configured by ``MCP_SERVER["MIDDLEWARE"]``.

A middleware is a factory taking ``get_response`` and returning an async callable of a ``Context``::

    def timing(get_response):
        async def middleware(ctx):
            started = time.monotonic()
            try:
                return await get_response(ctx)
            finally:
                log.info("%s took %.3fs", ctx.method, time.monotonic() - started)
        return middleware

The reply guarantee is not in this list: it always wraps the whole chain.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import lru_cache
from typing import Any

from django.utils.module_loading import import_string

from ..core.context import Context
from .dispatcher import dispatch

__all__ = ["GetResponse", "build_chain", "get_chain"]

GetResponse = Callable[[Context], Awaitable[dict[str, Any] | None]]


def build_chain(paths: Sequence[str], inner: GetResponse = dispatch) -> GetResponse:
    """Wrap ``inner`` in the middleware named by ``paths`` (first is outermost)."""
    handler = inner
    for path in reversed(paths):
        factory = import_string(path)
        handler = factory(handler)
    return handler


@lru_cache(maxsize=8)
def get_chain(paths: tuple[str, ...]) -> GetResponse:
    """The chain for ``paths``, built once per distinct setting."""
    return build_chain(paths)
