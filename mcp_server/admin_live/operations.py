"""Operator actions: abort requests and end sessions, through the one settle path.

An abort asks the worker holding the request (named by its ledger record) to settle it as ``aborted`` with
:data:`~mcp_server.wire.errors.REQUEST_ABORTED` (-32003, "Request aborted by an operator"); that worker's
compare-and-set makes it the request's only reply: a request that was answered, cancelled or closed first
is left alone, and its handler's late result is dropped. When no live worker holds it (its worker died and
its lease ran out), the ledger's own compare-and-set settles the record. Ending a session answers its
in-flight requests ``-32000`` on every worker and makes later requests 404.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.utils import timezone

from ..conf import mcp_settings
from ..core.records import LedgerRecord
from ..core.states import State
from ..core.tasks import CANCELLED
from ..protocol.settlement import ABORT_MESSAGE, aborted_response, outcome_of
from ..sessions import aend_session
from ..stores.ledger import get_ledger
from ..stores.tasks import new_task_store
from ..wire.messages import (
    WORKERS_GROUP,
    AbortRequest,
    AbortResult,
    StopTask,
    TaskStatus,
    parse_event,
    task_group,
    to_event,
)

__all__ = [
    "ABORT_MESSAGE",
    "END_REASON",
    "aabort_requests",
    "abort_requests",
    "aborted_response",
    "acancel_tasks",
    "aend_sessions",
    "cancel_tasks",
    "end_sessions",
]

END_REASON = "session ended by an operator"

TASK_CANCEL_MESSAGE = "Cancelled by an operator"
"""The ``statusMessage`` of a task an operator cancelled."""
"""The ``<why>`` of ``Connection closed: <why>`` for requests of a session an operator ended."""

REPLY_TIMEOUT = 3.0
"""Seconds to wait for the worker holding a request to say whether it aborted it."""


async def _ask_holder(record: LedgerRecord) -> bool | None:
    """Ask the worker holding ``record`` to abort it: its answer, or ``None`` when it does not answer."""
    layer = get_channel_layer(mcp_settings.CHANNEL_LAYER)
    if layer is None or not record.channel:
        return None
    # The default prefix, as every consumer and each worker's runtime use: channels-redis receives all the
    # channels of one prefix in a process through one loop, and a receiver of another prefix holding the
    # layer's lock would hold up every other receiver of the process.
    reply_to = await layer.new_channel()
    request = AbortRequest(
        session_id=record.session_id, key=record.request_key, reply_to=reply_to, pk=record.pk
    )
    await layer.send(record.channel, to_event(request))
    try:
        async with asyncio.timeout(REPLY_TIMEOUT):
            while True:
                reply = parse_event(await layer.receive(reply_to))
                if isinstance(reply, AbortResult) and reply.key == record.request_key:
                    return reply.aborted
    except TimeoutError:
        return None


async def aabort_requests(pks: Iterable[Any]) -> list[LedgerRecord]:
    """Abort the pending requests with these ledger keys; returns those this call settled."""
    ledger = get_ledger()
    aborted: list[LedgerRecord] = []
    for pk in pks:
        record = await ledger.aget(LedgerRecord(session_id=None, request_key="", method="", pk=pk))
        if record is None or record.state != State.PENDING:
            continue
        settled = await _ask_holder(record)
        if settled is None and (record.lease_expires is None or record.lease_expires < timezone.now()):
            outcome = outcome_of(aborted_response(record.request_id))
            settled = await ledger.asettle(record, State.ABORTED.value, outcome)  # nobody holds it any more
        if settled:
            aborted.append(record)
    return aborted


async def aend_sessions(session_ids: Iterable[str], reason: str = END_REASON) -> list[str]:
    """End these sessions; returns the ids of those that were still active."""
    return [session_id for session_id in session_ids if await aend_session(session_id, reason)]


def abort_requests(pks: Iterable[Any]) -> list[LedgerRecord]:
    """Sync twin of :func:`aabort_requests` (admin views)."""
    return async_to_sync(aabort_requests)(list(pks))


def end_sessions(session_ids: Iterable[str], reason: str = END_REASON) -> list[str]:
    """Sync twin of :func:`aend_sessions` (admin views)."""
    return async_to_sync(aend_sessions)(list(session_ids), reason)


async def acancel_tasks(task_ids: Iterable[str]) -> list[str]:
    """Cancel these tasks (tasks extension) if they are still live: the store's compare-and-set settles each
    ``cancelled``, then every worker is told to stop it (the one running it does). Returns those cancelled."""
    store = new_task_store()
    cancelled = [t for t in task_ids if await store.afinish(t, CANCELLED, message=TASK_CANCEL_MESSAGE)]
    layer = get_channel_layer(mcp_settings.CHANNEL_LAYER)
    if layer is not None:
        for task_id in cancelled:
            await layer.group_send(WORKERS_GROUP, to_event(StopTask(task_id=task_id)))
            record = await store.aget(task_id)
            if record is not None:  # to the workers watching it (notifications/tasks)
                status = TaskStatus(task_id=task_id, task=record.detailed())
                await layer.group_send(task_group(task_id), to_event(status))
    return cancelled


def cancel_tasks(task_ids: Iterable[str]) -> list[str]:
    """Sync twin of :func:`acancel_tasks` (admin views)."""
    return async_to_sync(acancel_tasks)(list(task_ids))
