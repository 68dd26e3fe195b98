"""The cyclic garbage collector held still while a test counts what only it would free."""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Iterator

import pytest

__all__ = ["cyclic_garbage", "no_collection"]


@pytest.fixture
def no_collection() -> Iterator[None]:
    """The collector off for the test (collected once first, so that what it finds is the test's own)."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def cyclic_garbage() -> Counter[str]:
    """The objects only the cyclic collector would free now, by type (and function name), freed here."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        found = Counter(
            f"{type(o).__qualname__} {getattr(o, '__qualname__', '')}".strip() for o in gc.garbage
        )
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.collect()  # (what was saved is still cyclic: freed now, not found again by the next count)
    return found
