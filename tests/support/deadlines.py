"""A request's deadline read from its timer: whether it can still fire.

A handler runs inside ``asyncio.timeout`` (``Context.deadline``). The deadline is disarmed when the handler
claims its answer (``reschedule(None)``) or when its scope ends (the handler returned, or its task was
stopped): either way the scope drops its ``TimerHandle`` from the loop. A test proves that on the timer itself
rather than by sleeping past the moment it would have fired.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["timer_state"]


def timer_state(scope: asyncio.Timeout) -> dict[str, Any]:
    """``{"expired": ..., "armed": ...}``: whether the deadline fired, and whether a timer for it is still
    scheduled on the loop (``False`` once disarmed or fired).

    ``asyncio.Timeout`` has no public query for its handle: CPython (3.11 to 3.13) keeps it in
    ``_timeout_handler``, ``None`` when none is scheduled. A Python that renamed it fails here, loudly.
    """
    handle = vars(scope)["_timeout_handler"]
    assert handle is None or isinstance(handle, asyncio.TimerHandle | asyncio.Handle), handle
    armed = handle is not None and not handle.cancelled()
    return {"expired": scope.expired(), "armed": armed}
