"""The text a scrape gets (the one module of :mod:`mcp_server.metrics` that imports ``prometheus_client``).

One process (no ``PROMETHEUS_MULTIPROC_DIR``): ``prometheus_client``'s default registry (the request metrics,
the writer's gauges, and whatever else the site and ``prometheus_client`` register there, such as
``process_*``). Several worker processes: set ``PROMETHEUS_MULTIPROC_DIR`` to an empty directory in every
worker's environment before it starts (each writes its values to files there, which
:class:`~prometheus_client.multiprocess.MultiProcessCollector` adds up), and empty it at every deploy. The
files of a worker that died are left out of the writer's gauges (``livesum``, ``livemax``): each scrape
forgets those of processes no longer running. Then the ledger's figures (:mod:`.figures`), the same whichever
worker answers.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

from prometheus_client import REGISTRY, CollectorRegistry, multiprocess
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from ..telemetry import WriterView
from ..telemetry.prometheus import publish_writer
from .figures import LedgerFigures

__all__ = ["LedgerCollector", "forget_dead_workers", "render"]

LIVE_GAUGE_FILE = re.compile(r"^gauge_live[a-z]+_(\d+)\.db$")


class LedgerCollector:
    """The ledger's figures of one scrape, as gauges."""

    def __init__(self, figures: LedgerFigures) -> None:
        self.figures = figures

    def collect(self) -> Iterator[Metric]:
        figures = self.figures
        pending = GaugeMetricFamily(
            "mcp_server_pending_requests",
            "Requests pending now (every worker), by method and tool, as the ledger holds them.",
            labels=["mcp_method_name", "gen_ai_tool_name"],
        )
        for (method, tool), count in sorted(figures.pending.items()):
            pending.add_metric([method, tool], count)
        yield pending
        yield GaugeMetricFamily(
            "mcp_server_oldest_pending_request_age_seconds",
            "Seconds since the oldest pending request arrived (0: none is pending).",
            value=figures.oldest_age,
        )
        yield GaugeMetricFamily(
            "mcp_server_open_sessions", "MCP sessions not ended.", value=figures.open_sessions
        )
        yield GaugeMetricFamily(
            "mcp_server_live_tasks",
            "Tasks working or waiting for input (every worker).",
            value=figures.live_tasks,
        )


class _Registered:
    """This process's own registry (one process)."""

    def collect(self) -> Iterator[Metric]:
        yield from REGISTRY.collect()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def forget_dead_workers(directory: str) -> list[int]:
    """Remove the live-gauge files of processes no longer running from ``directory``; their pids."""
    dead = []
    for path in Path(directory).iterdir():
        match = LIVE_GAUGE_FILE.match(path.name)
        if match is not None and not _alive(int(match.group(1))):
            dead.append(int(match.group(1)))
    for pid in sorted(set(dead)):
        multiprocess.mark_process_dead(pid, directory)  # type: ignore[no-untyped-call]
    return sorted(set(dead))


def render(figures: LedgerFigures, accept: str, writer: WriterView | None = None) -> tuple[bytes, str]:
    """The body and content type of a scrape (``accept``: its ``Accept`` header; ``writer``: this process's
    ledger writer, whose gauges are set first)."""
    if writer is not None:
        publish_writer(writer)
    registry = CollectorRegistry(auto_describe=False)
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        forget_dead_workers(directory)
        multiprocess.MultiProcessCollector(registry, path=directory)  # type: ignore[no-untyped-call]
    else:
        registry.register(_Registered())
    registry.register(LedgerCollector(figures))
    encoder, content_type = choose_encoder(accept)
    return encoder(registry), content_type
