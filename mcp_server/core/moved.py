"""The warning of a module that moved: its old path still imports, re-exporting the new one's names."""

from __future__ import annotations

import warnings

__all__ = ["warn_moved"]


def warn_moved(old: str, new: str) -> None:
    """Warn, from the old module's top level, that ``old`` is deprecated and ``new`` is where to import from
    (``stacklevel`` points at the import of the old module)."""
    warnings.warn(f"{old} is deprecated: import from {new}", DeprecationWarning, stacklevel=3)
