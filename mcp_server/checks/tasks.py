"""Checks of the task settings (2026-07-28 tasks extension): ``mcp_server.E017``, ``E030``, ``E031``,
``W030``, ``W031``."""

from __future__ import annotations

from django.core.checks import CheckMessage, Error, Warning

from ..conf import MCPSettings
from .base import mcp_check, number, positive_int

__all__ = ["check_task_bounds", "check_task_settings"]


@mcp_check
def check_task_settings(conf: MCPSettings) -> list[CheckMessage]:
    """E017: ``TASK_TTL`` or ``TASK_POLL_INTERVAL`` is neither ``None`` nor a positive number of seconds."""
    return [
        Error(
            f"MCP_SERVER['{key}'] must be None or a positive number of seconds.",
            hint="Tasks (2026-07-28 tasks extension): how long a task is kept, how often clients poll it.",
            id="mcp_server.E017",
        )
        for key in ("TASK_TTL", "TASK_POLL_INTERVAL")
        if getattr(conf, key) is not None and not number(getattr(conf, key))
    ]


@mcp_check
def check_task_bounds(conf: MCPSettings) -> list[CheckMessage]:
    """E030 ``TASK_MAX_DURATION``, E031 ``MAX_TASKS_PER_OWNER`` / ``MAX_TASKS`` malformed; W030 no task ever
    times out; W031 a task may stay live past its advertised TTL."""
    messages: list[CheckMessage] = []
    duration, ttl = conf.TASK_MAX_DURATION, conf.TASK_TTL
    if duration is not None and not number(duration):
        messages.append(
            Error(
                "MCP_SERVER['TASK_MAX_DURATION'] must be None (the task's TTL) or a positive number of "
                "seconds.",
                id="mcp_server.E030",
            )
        )
    for key in ("MAX_TASKS_PER_OWNER", "MAX_TASKS"):
        value = getattr(conf, key)
        if value is not None and not positive_int(value):
            messages.append(
                Error(
                    f"MCP_SERVER['{key}'] must be a positive integer or None (no limit).",
                    id="mcp_server.E031",
                )
            )
    if duration is None and ttl is None:
        messages.append(
            Warning(
                "MCP_SERVER['TASK_MAX_DURATION'] and TASK_TTL are both None: a task never times out, and one "
                "parked input_required holds its worker's memory for ever.",
                hint="Set TASK_MAX_DURATION (seconds).",
                id="mcp_server.W030",
            )
        )
    elif duration is not None and ttl is not None and number(duration) and number(ttl) and duration > ttl:
        messages.append(
            Warning(
                f"MCP_SERVER['TASK_MAX_DURATION'] ({duration:g}s) exceeds TASK_TTL ({ttl:g}s): a task may "
                "stay live past the ttlMs it advertises.",
                id="mcp_server.W031",
            )
        )
    return messages
