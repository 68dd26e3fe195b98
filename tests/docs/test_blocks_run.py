"""Every ``python`` block of the tutorial and the how-to guides is run by a test, so that a renamed setting
or function breaks the build and not the reader: each block names its file on its first line
(``# library/mcp.py``, ``# settings.py (at the end)``), which is how the tests take it from the page
(``tests.support.new_site.doc_block_list``), and a test reads the page and runs that file.

A new guide's blocks are run by adding the page to ``CASES`` in ``tests/docs/test_guide_blocks.py``, which
writes all of a page's named blocks into a site; the other tests below name each block they run.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.live import ROOT
from tests.support.new_site import doc_block_list

DOCS = ROOT / "docs"
GUIDES = sorted(
    path
    for part in ("tutorial", "howto")
    for path in (DOCS / part).rglob("*.md")
    if "_build" not in path.parts
)
GENERIC = ROOT / "tests" / "docs" / "test_guide_blocks.py"
"""Writes every named block of each page it names into a site (``place_blocks``)."""
RUNNERS = [
    GENERIC,
    ROOT / "tests" / "support" / "new_site.py",  # build_site: the installation and authentication blocks
    *sorted((ROOT / "tests" / "end_to_end").glob("test_new_site*.py")),
    ROOT / "tests" / "end_to_end" / "test_tutorial.py",
]


def python_block_count(page: Path) -> int:
    return len(re.findall(r"^( *)```python\n(.*?)^\1```", page.read_text(), re.S | re.M))


@pytest.mark.parametrize("page", GUIDES, ids=lambda p: str(p.relative_to(DOCS)))
def test_every_python_block_is_run_by_a_test(page: Path) -> None:
    name = str(page.relative_to(DOCS).with_suffix(""))
    named = doc_block_list(name)
    assert len(named) == python_block_count(page), (
        f"{name}: a python block whose first line does not name its file (# library/mcp.py): no test takes it"
    )
    readers = [runner for runner in RUNNERS if f'"{name}"' in runner.read_text()]
    for file, _code in named:
        assert readers, (
            f"{name}: no test reads this page's blocks (add it to tests/docs/test_guide_blocks.py)"
        )
        assert any(runner == GENERIC or f'"{file}"' in runner.read_text() for runner in readers), (
            f"{name}: no test runs its block {file}"
        )


def test_the_runners_exist() -> None:
    assert all(runner.is_file() for runner in RUNNERS)
    assert len(RUNNERS) >= 6
