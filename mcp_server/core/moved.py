"""Names a package exports from other modules: imported on first use (:func:`lazy_exports`), or kept at an
old path that warns (:func:`warn_moved`, :func:`moved_up`, :func:`moved_names`). Imports nothing of the
project."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Collection, Mapping
from typing import Any

__all__ = ["lazy_exports", "moved_names", "moved_up", "warn_moved"]


def warn_moved(old: str, new: str) -> None:
    """Warn, from the old module's top level, that ``old`` is deprecated and ``new`` is where to import from
    (``stacklevel`` points at the import of the old module)."""
    warnings.warn(f"{old} is deprecated: import from {new}", DeprecationWarning, stacklevel=3)


def lazy_exports(package: str, modules: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: each name in ``modules`` is imported from the module it maps
    to on first use (so the package imports nothing heavy itself); any other name is an ``AttributeError``."""

    def __getattr__(name: str) -> Any:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return __getattr__


def moved_up(old: str, new: str, names: Collection[str]) -> Callable[[str], Any]:
    """For an old module whose code moved to a higher layer (``mcp_server.ledger.writer`` to
    ``mcp_server.runtime.writer``): warn as :func:`warn_moved` does, and return the old module's
    ``__getattr__``, which takes each of ``names`` from ``new`` on first use. The old module imports nothing
    of ``new`` itself, so its layer never imports the higher one; only a caller of the old path does."""
    warnings.warn(f"{old} is deprecated: import from {new}", DeprecationWarning, stacklevel=3)
    return lazy_exports(old, dict.fromkeys(names, new))


def moved_names(module: str, modules: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``module``, which stays, for names that moved out of it: each name in
    ``modules`` warns (``DeprecationWarning``, naming the module it moved to), then is imported from there on
    use; any other name is an ``AttributeError``.

    The one way a lower layer still answers for a name a higher layer now defines: by import string, on
    first use of the deprecated name only (nothing of the project imports it so)."""
    exports = lazy_exports(module, modules)

    def __getattr__(name: str) -> Any:
        if name in modules:
            warnings.warn(
                f"{module}.{name} is deprecated: import from {modules[name]}",
                DeprecationWarning,
                stacklevel=2,
            )
        return exports(name)

    return __getattr__
