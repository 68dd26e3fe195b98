"""The per-process runtime: everything a worker process keeps while it serves MCP, in one object.

One :class:`Runtime` is created at start-up (``mcp_server``'s app config holds the process's own, see
:func:`get_runtime`); transports receive it, handlers reach it as ``ctx.runtime``, and tests build their own.
It holds the table of pending requests, the server-to-client requests waiting for the client, the session
cache, the ledger writer, the standalone streams this process holds, and the process's place on the channel
layer: one channel of its own, a member of :data:`~mcp_server.wire.messages.WORKERS_GROUP`, where every
cross-worker message for it arrives (:meth:`Runtime.handle`).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import socket
import threading
import uuid
import weakref
from typing import Any

from channels.layers import get_channel_layer
from django.apps import apps

from ..conf import mcp_settings
from ..core.records import LedgerRecord, request_key
from ..core.stores import CHANNEL_LAYER, bounded, store_timeout
from ..ledger import Ledger, get_ledger
from ..sessions import SessionCache, aend_session
from ..stores.events import EventStore, get_event_store
from ..stores.tasks import new_task_store
from ..telemetry import writer_gauges
from ..wire.jsonrpc import RequestId
from ..wire.messages import (
    WORKERS_GROUP,
    CancelRequest,
    parse_event,
)
from .acts import WorkerMessages
from .credentials import CredentialWatches
from .event_writer import EventWriter
from .listeners import ListenerTable
from .outbound import OutboundTable
from .requests import RequestTable
from .stream_hub import StreamHub
from .streams import SessionStreams, StreamSink
from .tasks import TaskRunner
from .upkeep import Holding, Upkeep
from .writer import LedgerWriter

__all__ = ["Runtime", "get_runtime", "new_worker_id"]

logger = logging.getLogger("mcp_server.runtime")


TASKS_GRACE = 2.0
"""Seconds :meth:`Runtime.aclose` waits for its cancelled background tasks."""


def new_worker_id() -> str:
    """A process's identity in the ledger (its leases carry it): host, pid and a random suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Runtime(WorkerMessages):
    """A worker process's MCP state (see the module docstring). Call :meth:`start` inside the event loop."""

    def __init__(
        self,
        *,
        worker_id: str | None = None,
        ledger: Ledger | None = None,
        channel_layer_alias: str | None = None,
        flush_interval: float | None = None,
        session_cache_ttl: float | None = None,
        freeze_gc: bool = False,
        event_store: EventStore | None = None,
    ) -> None:
        self.worker_id = worker_id or new_worker_id()
        self.ledger = ledger if ledger is not None else get_ledger()
        interval = mcp_settings.LEDGER_FLUSH_INTERVAL if flush_interval is None else flush_interval
        self.writer = LedgerWriter(self.ledger, interval=interval, on_refused=self._refused)
        self.requests = RequestTable(
            self.writer,
            worker_id=self.worker_id,
            channel=lambda: self.channel,
            on_remembered_cancel=self._cancel_settled,
        )
        self.outbound = OutboundTable()
        ttl = mcp_settings.SESSION_CACHE_TTL if session_cache_ttl is None else session_cache_ttl
        self.sessions = SessionCache(float(ttl))
        self.event_store = event_store if event_store is not None else get_event_store()
        self.events = EventWriter(self.event_store, interval=interval)
        """Writes the SSE events of handshake-era streams to the event store, behind the request path."""
        self.layer_alias = channel_layer_alias or mcp_settings.CHANNEL_LAYER
        self.layer: Any = get_channel_layer(self.layer_alias)
        """The Channels layer other workers reach this one through (``None``: this process only)."""
        self.tasks = TaskRunner(
            new_task_store(),
            worker_id=self.worker_id,
            channel=lambda: self.channel,
            layer=self.layer,
            stop_elsewhere=self._stop_task_elsewhere,
        )
        """The tasks (extension ``io.modelcontextprotocol/tasks``) running here, and the shared task store."""
        self.upkeep = Upkeep(
            self.ledger,
            self.worker_id,
            holding=self._holding,
            tasks=self.tasks.store,
            running_tasks=self.tasks.held,
            stop_tasks=self.tasks.stop_local,
            recheck_tasks=self.tasks.recheck,
            events=self.event_store,
            wake=self._wake,
        )
        self.channel = ""
        """This process's channel-layer name (empty until :meth:`start`, or without a channel layer)."""
        self.listeners = ListenerTable(lambda: self.layer, lambda: self.channel)
        """The ``subscriptions/listen`` streams this process holds (2026-07-28)."""
        self.tasks.status_listeners.append(self._task_status)
        self.resumed = StreamHub(lambda: self.layer, lambda: self.channel)
        """The resumed streams (``GET`` with ``Last-Event-ID``) this process holds."""
        self.credentials = CredentialWatches()
        """The credentials of the long-lived streams this process holds, checked again while they are open."""
        self.exchanges: weakref.WeakSet[Any] = weakref.WeakSet()
        """Exchanges whose response is open (graceful shutdown waits for them)."""
        self.shutting_down = False
        self.shutdown_hooked = False
        self.exit_watchdog: threading.Timer | None = None
        """Armed by a signal to stop (:func:`~mcp_server.transports.shutdown.arm_exit_watchdog`)."""
        """Whether the server's stop (Twisted trigger or signal handlers) starts :meth:`ashutdown`."""
        self._shutdown_task: asyncio.Task[int] | None = None
        self.freeze_gc = freeze_gc
        self.streams = SessionStreams(lambda: self.layer, lambda: self.channel)
        """The standalone streams (a GET stream, the stdio output) this process holds, by session."""
        self._tasks: list[asyncio.Task[None]] = []
        self._started: asyncio.AbstractEventLoop | None = None
        self._starting: asyncio.Future[None] | None = None
        self._acts = self._message_table()

    # -- life cycle ------------------------------------------------------------------------------------------

    def is_started(self) -> bool:
        """Whether :meth:`start` has finished on the running loop (the request path's test: no coroutine)."""
        starting = self._starting
        return self._started is asyncio.get_running_loop() and starting is not None and starting.done()

    async def start(self) -> None:
        """Join the channel layer and start the background tasks (once per event loop; cheap after that)."""
        loop = asyncio.get_running_loop()
        if self._started is loop:
            if self._starting is not None and not self._starting.done():
                await asyncio.shield(self._starting)
            return
        self._started = loop
        self._starting = loop.create_future()
        try:
            layer = self.layer
            if layer is not None:
                joined = await self._join(layer)
                listening = self._listen(layer, rejoin=not joined)
                self._tasks.append(loop.create_task(listening, name="mcp worker channel"))
            self._tasks.append(loop.create_task(self.upkeep.run(), name="mcp ledger upkeep"))
            gauges = writer_gauges(self.writer)  # Prometheus: the writer's queue and lag, every second
            if gauges is not None:
                self._tasks.append(loop.create_task(gauges, name="mcp ledger writer gauges"))
            if self.freeze_gc:  # start-up objects live for ever: keep them out of the collector's way
                gc.collect()
                gc.freeze()
        finally:
            self._starting.set_result(None)

    async def aclose(self) -> None:
        """Flush the ledger and the event store, and stop the background tasks."""
        await self.writer.aclose()
        await self.events.aclose()
        for task in self._tasks:
            task.cancel()
        if self._tasks:  # a store client that holds on to a cancelled wait must not hold the exit for ever
            _done, stuck = await asyncio.wait(self._tasks, timeout=TASKS_GRACE)
            for task in stuck:
                logger.warning("%s did not stop within %gs; left behind", task.get_name(), TASKS_GRACE)
        self._tasks.clear()
        if self.layer is not None and self.channel:
            try:
                await bounded(self.layer.group_discard(WORKERS_GROUP, self.channel), CHANNEL_LAYER)
            except Exception:
                logger.debug("could not leave the workers group", exc_info=True)
        self._started = None

    # -- what transports ask -----------------------------------------------------------------------------

    async def cancel(self, session_id: str | None, request_id: RequestId) -> bool:
        """The client cancelled a request: settle it here, or tell every worker (one of them holds it, or it
        has not arrived yet and is remembered)."""
        key = request_key(request_id)
        if await self.requests.cancel(session_id, key, remember=False):
            return True
        if session_id is not None and not await self._broadcast(
            CancelRequest(session_id=session_id, key=key)
        ):
            await self.requests.cancel(session_id, key)
        return False

    async def end_session(self, session_id: str, reason: str) -> bool:
        """End a session everywhere (see :func:`~mcp_server.sessions.aend_session`).

        Raises :class:`~mcp_server.core.stores.StoreUnavailable` when the database or the channel layer
        does not answer within ``STORE_TIMEOUT``; the requests held here are answered all the same.
        """
        try:
            return await bounded(aend_session(session_id, reason), "session store")
        finally:
            await self._session_ended(session_id, reason)  # at once here, whatever the stores do

    async def attach_stream(self, session_id: str, sink: StreamSink) -> None:
        """Route the session's server-initiated messages to ``sink`` (from any worker)."""
        await self.streams.attach(session_id, sink)

    async def detach_stream(self, session_id: str, sink: StreamSink) -> None:
        """Stop routing to ``sink``."""
        await self.streams.detach(session_id, sink)

    # -- messages from other workers ----------------------------------------------------------------------

    async def _join(self, layer: Any) -> bool:
        """Take a channel of this worker's own and join the workers' group; ``False`` if the layer failed."""
        try:
            if not self.channel:
                self.channel = await bounded(
                    layer.new_channel(), CHANNEL_LAYER
                )  # default prefix: see admin_live
            await bounded(layer.group_add(WORKERS_GROUP, self.channel), CHANNEL_LAYER)
        except Exception as exc:
            logger.warning(
                "channel layer unreachable, messages from other workers do not arrive yet: %r", exc
            )
            return False
        return True

    async def _listen(self, layer: Any, *, rejoin: bool = False) -> None:
        """Receive what other workers send; after a failure, join the groups again (a restarted Redis forgot
        them, or the layer was unreachable at start-up) before receiving again."""
        while True:
            try:
                if rejoin:
                    await self._rejoin(layer)
                    rejoin = False
                event = await layer.receive(self.channel)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is None or task.cancelling():
                    raise
                # Not this task's cancel: one that escaped the layer's receive (channels_redis shares one
                # receive among a process's channels). Ending here would leave this worker deaf to every
                # other worker; receive again.
                logger.warning("channel layer receive was cancelled from within the layer; receiving again")
                await asyncio.sleep(0.05)
                continue
            except Exception:
                logger.exception("channel layer receive failed; retrying in 1s")
                rejoin = True
                await asyncio.sleep(1.0)
                continue
            message = parse_event(event)
            if message is None:
                logger.warning("unknown message on the worker channel: %r", event.get("type"))
                continue
            try:
                await self.handle(message)
            except Exception:
                logger.exception("could not act on %s", message.type)

    async def _rejoin(self, layer: Any) -> None:
        if not await self._join(layer):
            raise ConnectionError("the channel layer is still unreachable")
        await self.streams.rejoin()
        await self.listeners.rejoin()
        await self.resumed.rejoin()

    def _holding(self) -> Holding:
        """What this worker holds in the ledger: its pending requests and the settlements not yet written."""
        pending = self.requests.pending()
        pks = {e.record.pk for e in pending if e.record.pk is not None}
        sessions = {e.session_id for e in pending if e.session_id is not None}
        return Holding(
            pks | self.writer.held(),
            self.writer.oldest_unwritten(),
            sessions | self.writer.unwritten_sessions(),
        )

    async def _wake(self, stream_id: str) -> None:
        await self.resumed.wake(stream_id)

    async def _refused(self, record: LedgerRecord) -> None:
        await self.requests.refuse(record)

    # -- shutdown ----------------------------------------------------------------------------------------

    def start_shutdown(self) -> None:
        """Start :meth:`ashutdown` in the background (from a signal handler, through the loop)."""
        if self._shutdown_task is None:
            self._shutdown_task = asyncio.ensure_future(self.ashutdown())

    async def ashutdown(self, reason: str = "server shutting down") -> int:
        """Answer every request held here with -32000, finish open responses within ``SHUTDOWN_GRACE``."""
        if self.shutting_down:
            return 0
        self.shutting_down = True
        grace = float(mcp_settings.SHUTDOWN_GRACE)
        exchanges = list(self.exchanges)
        closed = 0
        try:
            async with asyncio.timeout(grace):
                await self.listeners.finish(grace=grace / 2)  # answered with their complete result
                closed = await self.requests.shutdown(reason)
                await self.tasks.shutdown()
                self.streams.close_all(reason)
                waits = [
                    w for w in (getattr(e, "task", None) for e in exchanges) if w is not None and not w.done()
                ]
                if waits:
                    await asyncio.wait(waits)
        except TimeoutError:
            logger.warning("shutdown grace of %.1fs ran out with responses still open", grace)
        last = max(1.0, store_timeout())  # the last batches, together: the shutdown's bound (I11)
        await asyncio.gather(self.writer.aclose(grace=last), self.events.aclose(grace=last))
        logger.info("shutdown: %d in-flight requests answered with -32000", closed)
        return closed


def get_runtime() -> Runtime:
    """This process's runtime, created by the ``mcp_server`` app config at start-up (``AppConfig.ready``)."""
    runtime: Runtime = getattr(apps.get_app_config("mcp_server"), "runtime")  # noqa: B009
    return runtime
