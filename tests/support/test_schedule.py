"""CI's order of the modules (``tests/support/schedule.py``) names modules that exist, once each, and puts
their tests first without reordering any module's own tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.schedule import SLOWEST_FIRST, slowest_first

ROOT = Path(__file__).resolve().parents[2]


def test_every_module_named_exists_once() -> None:
    assert len(set(SLOWEST_FIRST)) == len(SLOWEST_FIRST)
    assert [path for path in SLOWEST_FIRST if not (ROOT / path).is_file()] == []


class Item:
    def __init__(self, nodeid: str) -> None:
        self.nodeid = nodeid


def test_the_slowest_modules_come_first_each_in_its_own_order() -> None:
    first, second = SLOWEST_FIRST[0], SLOWEST_FIRST[1]
    nodeids = ["tests/a.py::t1", f"{second}::t1", "tests/b.py::t1", f"{first}::t2", f"{first}::t1"]
    items = [Item(n) for n in nodeids]
    slowest_first(items)
    assert [i.nodeid for i in items] == [
        f"{first}::t2",
        f"{first}::t1",
        f"{second}::t1",
        "tests/a.py::t1",
        "tests/b.py::t1",
    ]


def test_this_session_ran_in_that_order(request: pytest.FixtureRequest) -> None:
    """The hook is installed: of the session's items, the first module is the first one named that ran."""
    collected = {item.nodeid.split("::", 1)[0] for item in request.session.items}
    expected = next((path for path in SLOWEST_FIRST if path in collected), None)
    if expected is not None:
        assert request.session.items[0].nodeid.split("::", 1)[0] == expected
