"""Names a package exports from other modules: imported on first use (:func:`lazy_exports`), or kept at an
old path that warns (:func:`warn_moved` for a whole module, :func:`moved_names` for names that left a module
that stays). Imports nothing of the project."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports", "moved_names", "warn_moved"]


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
