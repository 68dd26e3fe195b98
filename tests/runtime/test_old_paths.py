"""The module paths from before ``mcp_server.runtime`` became a package still import: each warns with the
path it moved to and gives the same objects, and none imports the runtime until a name is asked for (the
ledger layer never imports the one above it)."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

MOVED = [
    ("mcp_server.ledger.writer", "mcp_server.runtime.writer", ["MAX_ATTEMPTS", "LedgerWriter"]),
    ("mcp_server.ledger.event_writer", "mcp_server.runtime.event_writer", ["MAX_QUEUED", "EventWriter"]),
    (
        "mcp_server.ledger.batching",
        "mcp_server.runtime.batching",
        ["MAX_BACKOFF", "MIN_BACKOFF", "BatchLoop"],
    ),
    ("mcp_server.ledger.stream_hub", "mcp_server.runtime.stream_hub", ["POLL_INTERVAL", "StreamHub"]),
    ("mcp_server.ledger.inflight", "mcp_server.runtime.inflight", ["InFlight"]),
    (
        "mcp_server.ledger.upkeep",
        "mcp_server.runtime.upkeep",
        [
            "ORPHAN_GAP",
            "ORPHAN_REASON",
            "STRAY_REASON",
            "SWEEP_BATCHES",
            "Holding",
            "Upkeep",
            "add_default_hook",
        ],
    ),
]


@pytest.mark.parametrize(("old", "new", "names"), MOVED, ids=[old for old, _new, _names in MOVED])
def test_an_old_path_warns_with_the_new_one_and_gives_the_same_objects(
    old: str, new: str, names: list[str]
) -> None:
    sys.modules.pop(old, None)  # imported by an earlier test: the warning is given on import
    with pytest.warns(DeprecationWarning, match=f"{old} is deprecated: import from {new}$"):
        shim = importlib.import_module(old)
    moved = importlib.import_module(new)
    for name in names:
        assert getattr(shim, name) is getattr(moved, name), name
    assert set(shim.__all__) == set(moved.__all__)
    with pytest.raises(AttributeError, match="has no attribute 'logger'"):
        shim.logger  # noqa: B018  # only the public names are given


def test_an_old_path_imports_nothing_of_the_runtime_until_a_name_is_asked_for() -> None:
    script = (
        "import sys, warnings; warnings.simplefilter('ignore')\n"
        "import mcp_server.ledger.writer as old\n"
        "print(sorted(m for m in sys.modules if m.startswith('mcp_server.runtime')))\n"
        "import django; django.setup()\n"
        "old.LedgerWriter\n"
        "print('mcp_server.runtime.writer' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.split("\n")[:2] == ["[]", "True"]


def test_the_runtime_package_gives_the_names_of_the_old_module() -> None:
    import mcp_server.runtime
    from mcp_server.runtime.process import Runtime, get_runtime, new_worker_id
    from mcp_server.runtime.streams import StreamSink

    assert mcp_server.runtime.__all__ == ["Runtime", "StreamSink", "get_runtime", "new_worker_id"]
    assert mcp_server.runtime.Runtime is Runtime
    assert mcp_server.runtime.get_runtime is get_runtime
    assert mcp_server.runtime.new_worker_id is new_worker_id
    assert mcp_server.runtime.StreamSink is StreamSink


MOVED_NAMES = [
    ("mcp_server.protocol.outbound", "OutboundTable", "mcp_server.runtime.outbound", "aforward_answer"),
    ("mcp_server.protocol.listen", "ListenerTable", "mcp_server.runtime.listeners", "listen"),
    ("mcp_server.protocol.tasks", "TaskRunner", "mcp_server.runtime.tasks", "call_tool"),
    ("mcp_server.protocol.settlement", "RequestTable", "mcp_server.runtime.requests", "outcome_of"),
    (
        "mcp_server.protocol.credentials",
        "CredentialWatches",
        "mcp_server.runtime.credentials",
        "same_credential",
    ),
]


@pytest.mark.parametrize(
    ("module", "name", "new", "staying"), MOVED_NAMES, ids=[f"{m}.{n}" for m, n, _new, _s in MOVED_NAMES]
)
def test_a_table_at_its_old_path_warns_and_the_rest_of_its_module_does_not(
    module: str, name: str, new: str, staying: str
) -> None:
    old = importlib.import_module(module)
    moved = getattr(importlib.import_module(new), name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # what stays in the module is not deprecated
        assert callable(getattr(old, staying))
    with pytest.warns(
        DeprecationWarning, match=f"{module}.{name} is deprecated: import from {new}$"
    ) as caught:
        assert getattr(old, name) is moved
    assert caught[0].filename == __file__  # the warning points at the use of the old name
    assert name not in old.__all__
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        old.nothing  # noqa: B018


def test_the_old_name_imports_with_from() -> None:
    from mcp_server.runtime.outbound import OutboundTable

    with pytest.warns(DeprecationWarning, match="OutboundTable is deprecated") as caught:
        from mcp_server.protocol.outbound import OutboundTable as Old
    assert Old is OutboundTable
    assert caught[0].filename == __file__
