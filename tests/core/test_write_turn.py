"""Writers of one process take turns on a SQLite file (``mcp_server.core.writes.write_turn``) before
``BEGIN IMMEDIATE``, instead of meeting at SQLite's busy handler, which sleeps up to 100 ms between tries and
lets a later writer pass an earlier one (docs: "Writes and the guarantee").

Real threads, real transactions on the test database (a SQLite file). A thread inside ``write_transaction``
holds the turn until its block is done: a second writer (a ``write_transaction``, or the ledger writer's
batch through ``begin_write``) waits before it begins, starts as soon as the first is done, and gives up
after its connection's ``timeout`` with SQLite's own error.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
from django.db import OperationalError, connections

from mcp_server.core.writes import begin_write, write_transaction
from project.catalogue.models import Author

pytestmark = pytest.mark.django_db(transaction=True)

WAIT = 20.0


@pytest.fixture(autouse=True)
def sqlite_only() -> None:
    if connections["default"].vendor != "sqlite":
        pytest.skip("the turn is SQLite's (PostgreSQL writers lock rows, not the database)")


@pytest.fixture
def lock_timeout() -> Iterator[Callable[[float], None]]:
    """Set the SQLite ``timeout`` of connections opened from now on (the threads' own)."""
    options = connections.settings["default"].setdefault("OPTIONS", {})
    before = dict(options)

    def set_timeout(seconds: float) -> None:
        options["timeout"] = seconds
        connections["default"].settings_dict["OPTIONS"]["timeout"] = seconds

    yield set_timeout
    options.clear()
    options.update(before)
    connections["default"].settings_dict["OPTIONS"] = dict(before)


class Holder(threading.Thread):
    """A handler's thread: a write transaction that writes, then stays open until ``release`` is set."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.inside, self.release = threading.Event(), threading.Event()
        self.failure: Exception | None = None

    def run(self) -> None:
        try:
            with write_transaction():
                Author.objects.create(name="holder")
                self.inside.set()
                self.release.wait(WAIT)
        except Exception as exc:  # reported by the test
            self.failure = exc
            self.inside.set()
        finally:
            connections.close_all()


def run_in_thread(work: Callable[[], None]) -> tuple[threading.Thread, threading.Event, list[BaseException]]:
    """``work`` in a thread of its own: the thread, an event set when it is done, what it raised."""
    done, raised = threading.Event(), []

    def target() -> None:
        try:
            work()
        except BaseException as exc:
            raised.append(exc)
        finally:
            connections.close_all()
            done.set()

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, done, raised


@pytest.mark.parametrize("second", ["write_transaction", "ledger batch"])
def test_a_second_writer_waits_for_the_turn_and_starts_when_it_is_free(second: str) -> None:
    holder = Holder()
    holder.start()
    assert holder.inside.wait(WAIT)
    assert holder.failure is None
    began = threading.Event()

    def write() -> None:
        if second == "write_transaction":
            with write_transaction():
                began.set()
                Author.objects.create(name="second")
        else:  # as DatabaseLedger.write_claimed begins its batch
            with begin_write(connections["default"]):
                began.set()

    _thread, done, raised = run_in_thread(write)
    assert not began.wait(0.5), "the second writer began while the first held the turn"
    holder.release.set()
    assert done.wait(WAIT)
    assert raised == []
    assert began.is_set()
    holder.join(WAIT)
    names = set(Author.objects.values_list("name", flat=True))
    assert {"holder"} <= names
    assert second != "write_transaction" or "second" in names


def test_a_writer_gives_up_after_its_timeout_as_sqlite_does(lock_timeout: Callable[[float], None]) -> None:
    lock_timeout(0.3)
    holder = Holder()
    holder.start()
    assert holder.inside.wait(WAIT)
    assert holder.failure is None
    started = time.monotonic()

    def write() -> None:
        with write_transaction():
            Author.objects.create(name="too late")

    _thread, done, raised = run_in_thread(write)
    assert done.wait(WAIT)
    waited = time.monotonic() - started
    holder.release.set()
    holder.join(WAIT)
    assert len(raised) == 1, raised
    assert isinstance(raised[0], OperationalError), raised
    assert "database is locked" in str(raised[0])
    assert 0.25 <= waited < 0.3 + 10, waited  # (slack above for a loaded machine)
    assert not Author.objects.filter(name="too late").exists()


def test_a_nested_block_does_not_wait_for_its_own_turn() -> None:
    """A ``write_transaction`` inside another (or inside ``atomic``) joins it: it must not wait for the
    turn its own thread holds."""
    _thread, done, raised = run_in_thread(lambda: _nested())
    assert done.wait(WAIT)
    assert raised == []
    assert Author.objects.filter(name="inner").exists()


def _nested() -> None:
    with write_transaction(), write_transaction():
        Author.objects.create(name="inner")
