"""The order in which CI's two test processes take the modules: the slowest first.

``.ci/run`` runs the suite with pytest-xdist, module by module (``--dist loadfile``), in collection order
(``--no-loadscope-reorder``; xdist's own order puts the modules with the most tests first, which left the
slow modules of few tests, a wheel built and installed, a site deployed, a conformance run, for the end,
one process busy with them while the other had nothing left). Longest first, the run ends on short modules
and both processes stay busy to the end. The figures are a full run's (junit times, 2026-12-07, two
processes on two cores); a module missing here keeps its place after them.
"""

from __future__ import annotations

import pytest

__all__ = ["SLOWEST_FIRST", "slowest_first"]

SLOWEST_FIRST = (
    "tests/end_to_end/test_conformance.py",  # 91 s
    "tests/end_to_end/transports/test_stdio.py",  # 77 s
    "tests/protocol/test_settlement_races.py",  # 62 s
    "tests/end_to_end/test_new_site.py",  # 56 s
    "tests/docs/test_guide_blocks.py",  # 56 s
    "tests/end_to_end/test_multiprocess_races.py",  # 55 s
    "tests/end_to_end/test_deploy.py",  # 47 s
    "tests/end_to_end/test_guarantee.py",  # 42 s
    "tests/packaging/test_wheel.py",  # 34 s
    "tests/end_to_end/protocol/test_tasks.py",  # 32 s
    "tests/ledger/test_hostile_records.py",  # 29 s
    "tests/end_to_end/limits/test_two_workers.py",  # 27 s
    "tests/end_to_end/test_tutorial.py",  # 26 s
    "tests/support/test_services_rerun.py",  # 25 s
    "tests/end_to_end/transports/test_fuzz_modern.py",  # 24 s (alone: added after that run)
    "tests/protocol/test_write_claims.py",  # 23 s
    "tests/end_to_end/transports/test_rules.py",  # 22 s
    "tests/end_to_end/transports/test_fuzz_hostile.py",  # 21 s
    "tests/ledger/test_insert_plan.py",  # 20 s
    "tests/end_to_end/test_new_site_api.py",  # 19 s
    "tests/end_to_end/test_tasks_workers.py",  # 19 s
    "tests/end_to_end/test_new_site_oauth.py",  # 19 s
    "tests/end_to_end/transports/test_v2026_07_28.py",  # 18 s
    "tests/end_to_end/transports/test_fuzz_headers.py",  # 18 s
    "tests/management/test_commands.py",  # 18 s
    "tests/end_to_end/oauth/test_cimd.py",  # 18 s
    "tests/end_to_end/transports/test_resumable.py",  # 17 s
    "tests/ledger/test_claim_in_flight.py",  # 17 s
    "tests/end_to_end/test_store_faults.py",  # 17 s
    "tests/end_to_end/test_live_writes.py",  # 16 s
    "tests/end_to_end/test_property.py",  # 16 s
)


def slowest_first(items: list[pytest.Item]) -> None:
    """Put the items of :data:`SLOWEST_FIRST`'s modules first, in its order (in place; a stable sort: each
    module's own order and the other modules' order are kept)."""
    rank = {path: n for n, path in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))
