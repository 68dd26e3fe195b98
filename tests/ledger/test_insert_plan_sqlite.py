"""SQLite's own side of the ledger's batch insert: the rows of one ``INSERT`` shrink to what the library's
parameter limit allows."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest
from django.db import DEFAULT_DB_ALIAS, connection, connections

from tests.ledger.test_insert_plan import assert_each_row_is_its_own, inserts_of, records

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's parameter limit"),
]


@pytest.fixture
def parameter_limit() -> Iterator[None]:
    """SQLite's limit on a statement's parameters at 100 while the test runs (a library built with a lower
    ``SQLITE_MAX_VARIABLE_NUMBER``: the default was 999 before 3.32), with an insert plan made for it."""
    connection.ensure_connection()
    raw = connection.connection
    before = raw.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 100)
    connections[DEFAULT_DB_ALIAS].__dict__.pop("_mcp_ledger_insert_plan", None)
    try:
        yield
    finally:
        raw.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, before)
        connections[DEFAULT_DB_ALIAS].__dict__.pop("_mcp_ledger_insert_plan", None)


@pytest.mark.usefixtures("parameter_limit")
def test_fewer_rows_a_statement_where_sqlite_allows_fewer_parameters() -> None:
    """100 parameters: 4 rows of 21 columns a statement (11 rows: 4, 4, 2 and 1)."""
    batch = records("small", 11)
    assert [insert.count("), (") + 1 for insert in inserts_of(batch)] == [4, 4, 2, 1]
    assert_each_row_is_its_own(batch)
