"""The child pytest of the race tests (tests/support/services_rerun.py): one that hangs is killed at its
timeout, and the failure names the file its output streamed to and quotes its end, which names the test that
hung."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.support.services_rerun import ON_SERVICES, rerun_on_services


@pytest.mark.skipif(ON_SERVICES, reason="runs in the parent")
def test_a_hung_child_is_killed_and_named_with_its_output(tmp_path: Path) -> None:
    with pytest.raises(AssertionError) as failure:
        rerun_on_services(
            __file__, test_a_hung_child_is_killed_and_named_with_its_output, tmp_path, 1, timeout=25
        )
    message = str(failure.value)
    output = tmp_path / "child-output.txt"
    assert (
        f"did not finish within 25s; its output (the test it was running is its last line) is in {output}"
        in (message)
    )
    assert "test_services_rerun.py::test_hangs_in_the_child" in message  # named as it started
    assert "test_hangs_in_the_child" in output.read_text()


@pytest.mark.skipif(not ON_SERVICES, reason="hangs in the child only")
def test_hangs_in_the_child() -> None:
    threading.Event().wait(600)  # never set: the parent's timeout kills this child
