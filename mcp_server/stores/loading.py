"""How a store backend is chosen: by the import path of its class in a setting, as Django's
``SESSION_ENGINE`` chooses a session backend.

A path from before :mod:`mcp_server.stores` (``mcp_server.ledger.database.DatabaseLedger`` and the others in
:data:`RENAMED`) is still accepted, with a ``DeprecationWarning`` naming the path that replaced it.
"""

from __future__ import annotations

import warnings
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

__all__ = ["RENAMED", "backend_path", "load_backend"]

RENAMED: dict[str, str] = {
    "mcp_server.ledger.database.DatabaseLedger": "mcp_server.stores.ledger.database.DatabaseLedger",
    "mcp_server.ledger.cache.CacheLedger": "mcp_server.stores.ledger.cache.CacheLedger",
    "mcp_server.ledger.events.DatabaseEventStore": "mcp_server.stores.events.database.DatabaseEventStore",
    "mcp_server.ledger.events.CacheEventStore": "mcp_server.stores.events.cache.CacheEventStore",
    "mcp_server.ledger.tasks.DatabaseTaskStore": "mcp_server.stores.tasks.database.DatabaseTaskStore",
}
"""Store paths a setting may still hold, each with the path that replaced it."""


def backend_path(setting: str, path: str) -> str:
    """The path to import for ``MCP_SERVER[setting] = path``: ``path`` itself, or what replaced it (with a
    ``DeprecationWarning`` that names the setting and the new path)."""
    new = RENAMED.get(path)
    if new is None:
        return path
    warnings.warn(
        f"MCP_SERVER[{setting!r}] = {path!r} is deprecated: use {new!r}", DeprecationWarning, stacklevel=3
    )
    return new


def load_backend(setting: str, path: object, base: type) -> type[Any]:
    """The store class ``MCP_SERVER[setting] = path`` names. Raises ``ImportError`` when it does not import,
    ``ImproperlyConfigured`` when it is no import path or no subclass of ``base``."""
    if not isinstance(path, str):
        raise ImproperlyConfigured(f"not an import path: {path!r}")
    found = import_string(backend_path(setting, path))
    if not (isinstance(found, type) and issubclass(found, base)):
        raise ImproperlyConfigured(f"{path!r} is not a {base.__name__} (a subclass of {base.__qualname__})")
    return found
