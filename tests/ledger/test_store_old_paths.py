"""The store modules from before ``mcp_server.stores`` still import, each warning with the path it moved to,
and give the same objects as the new paths; so does ``mcp_server.core.records.Ledger``, the one name that
left a module that stays; and the settings' old values still choose the same stores, with a warning."""

from __future__ import annotations

import importlib
import sys
import warnings
from types import ModuleType

import pytest
from django.conf import settings
from django.test import override_settings

from mcp_server.stores import events as event_stores
from mcp_server.stores import ledger as ledger_stores
from mcp_server.stores.events.base import EventStore
from mcp_server.stores.events.cache import CacheEventStore
from mcp_server.stores.events.database import DatabaseEventStore
from mcp_server.stores.ledger.base import Ledger
from mcp_server.stores.ledger.cache import CacheLedger
from mcp_server.stores.ledger.database import DatabaseLedger
from mcp_server.stores.loading import RENAMED, load_backend
from mcp_server.stores.tasks import TaskStore, new_task_store
from mcp_server.stores.tasks.database import DatabaseTaskStore

MOVED = [
    ("mcp_server.ledger.database", "mcp_server.stores.ledger.database", ["DatabaseLedger"]),
    ("mcp_server.ledger.cache", "mcp_server.stores.ledger.cache", ["CacheLedger"]),
    ("mcp_server.ledger.tasks", "mcp_server.stores.tasks.database", ["ANSWER_ATTEMPTS", "DatabaseTaskStore"]),
]
EVENTS = {
    "STORE": "mcp_server.stores.events.base",
    "EventStore": "mcp_server.stores.events.base",
    "StoredEvent": "mcp_server.stores.events.base",
    "keys_answered": "mcp_server.stores.events.base",
    "parse_event_id": "mcp_server.stores.events.base",
    "retention_cutoff": "mcp_server.stores.events.base",
    "DatabaseEventStore": "mcp_server.stores.events.database",
    "CacheEventStore": "mcp_server.stores.events.cache",
    "get_event_store": "mcp_server.stores.events",
}


def fresh_import(old: str, new: str) -> ModuleType:
    sys.modules.pop(old, None)  # imported by an earlier test: the warning is given on import
    with pytest.warns(DeprecationWarning, match=f"{old} is deprecated: import from {new}$"):
        return importlib.import_module(old)


@pytest.mark.parametrize(("old", "new", "names"), MOVED, ids=[old for old, _new, _names in MOVED])
def test_an_old_store_module_warns_with_the_new_one_and_gives_the_same_objects(
    old: str, new: str, names: list[str]
) -> None:
    shim = fresh_import(old, new)
    moved = importlib.import_module(new)
    for name in names:
        assert getattr(shim, name) is getattr(moved, name), name
    assert set(shim.__all__) == set(names)


def test_the_old_event_store_module_gives_what_its_users_import() -> None:
    shim = fresh_import("mcp_server.ledger.events", "mcp_server.stores.events")
    for name, module in EVENTS.items():
        assert getattr(shim, name) is getattr(importlib.import_module(module), name), name
    assert set(shim.__all__) == set(EVENTS)


def test_the_ledger_base_class_still_answers_at_core_records_with_a_warning() -> None:
    records = importlib.import_module("mcp_server.core.records")
    moved = r"^mcp_server\.core\.records\.Ledger is deprecated: import from mcp_server\.stores\.ledger\.base$"
    with pytest.warns(DeprecationWarning, match=moved):
        old = records.Ledger
    assert old is Ledger
    assert "Ledger" not in records.__all__
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        records.Nothing  # noqa: B018


def test_the_ledger_package_keeps_its_names_without_a_warning() -> None:
    import mcp_server.ledger as ledger

    assert ledger.get_ledger is ledger_stores.get_ledger
    assert ledger.Ledger is Ledger


@pytest.mark.parametrize(
    ("setting", "old", "store", "base"),
    [
        ("LEDGER_BACKEND", "mcp_server.ledger.database.DatabaseLedger", DatabaseLedger, Ledger),
        ("LEDGER_BACKEND", "mcp_server.ledger.cache.CacheLedger", CacheLedger, Ledger),
        (
            "EVENT_STORE_BACKEND",
            "mcp_server.ledger.events.DatabaseEventStore",
            DatabaseEventStore,
            EventStore,
        ),
        ("EVENT_STORE_BACKEND", "mcp_server.ledger.events.CacheEventStore", CacheEventStore, EventStore),
        ("TASK_STORE_BACKEND", "mcp_server.ledger.tasks.DatabaseTaskStore", DatabaseTaskStore, TaskStore),
    ],
)
def test_an_old_setting_value_loads_the_moved_store_with_a_warning(
    setting: str, old: str, store: type, base: type
) -> None:
    with pytest.warns(DeprecationWarning, match=f"MCP_SERVER\\['{setting}'\\] = '{old}' is deprecated: use"):
        assert load_backend(setting, old, base) is store
    assert RENAMED[old] == f"{store.__module__}.{store.__qualname__}"


def test_old_setting_values_still_build_the_stores_get_ledger_and_the_runtime_use() -> None:
    ledger_stores._build.cache_clear()  # a store built before for the same value gives no second warning
    event_stores._build.cache_clear()
    old = {
        **settings.MCP_SERVER,
        "LEDGER_BACKEND": "mcp_server.ledger.cache.CacheLedger",
        "EVENT_STORE_BACKEND": "mcp_server.ledger.events.CacheEventStore",
        "TASK_STORE_BACKEND": "mcp_server.ledger.tasks.DatabaseTaskStore",
    }
    with override_settings(MCP_SERVER=old), warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        built = (ledger_stores.get_ledger(), event_stores.get_event_store(), new_task_store())
    assert [type(store) for store in built] == [CacheLedger, CacheEventStore, DatabaseTaskStore]
    deprecated = sorted(str(w.message) for w in warned if issubclass(w.category, DeprecationWarning))
    assert deprecated == [
        f"MCP_SERVER[{setting!r}] = {old[setting]!r} is deprecated: use {RENAMED[old[setting]]!r}"
        for setting in ("EVENT_STORE_BACKEND", "LEDGER_BACKEND", "TASK_STORE_BACKEND")
    ]
