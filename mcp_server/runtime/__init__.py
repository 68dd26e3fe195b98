"""The per-process state of a worker serving MCP, in one package, above the ledger and the protocol.

- :mod:`~mcp_server.runtime.process`: :class:`Runtime`, one per process, holding the tables below; its part
  that acts on the messages of other workers is :mod:`~mcp_server.runtime.acts`.
- :mod:`~mcp_server.runtime.requests`: the requests in flight (``RequestTable``: each settled once; protocol
  code sees it as :class:`~mcp_server.protocol.interfaces.PendingRequests`).
- :mod:`~mcp_server.runtime.writer` (with :mod:`~mcp_server.runtime.write_through` and
  :mod:`~mcp_server.runtime.inflight`, the claims on the batch being written),
  :mod:`~mcp_server.runtime.event_writer`, :mod:`~mcp_server.runtime.batching`: the write-behind writers of
  the ledger and of the SSE events.
- :mod:`~mcp_server.runtime.upkeep`: leases, orphans, pruning, the tasks of dead workers and overdue ones.
- :mod:`~mcp_server.runtime.stream_hub`: the resumed streams; :mod:`~mcp_server.runtime.streams`: the
  standalone streams of each session; :mod:`~mcp_server.runtime.outbound`: the server-to-client requests
  waiting for their answers; :mod:`~mcp_server.runtime.listeners`: the open ``subscriptions/listen``
  streams; :mod:`~mcp_server.runtime.tasks`: the tasks running here; :mod:`~mcp_server.runtime.credentials`:
  the credentials of the open streams, checked again while they last.

``from mcp_server.runtime import Runtime, StreamSink, get_runtime, new_worker_id`` is as before the package.
"""

from __future__ import annotations

from .process import Runtime, get_runtime, new_worker_id
from .streams import StreamSink

__all__ = ["Runtime", "StreamSink", "get_runtime", "new_worker_id"]
