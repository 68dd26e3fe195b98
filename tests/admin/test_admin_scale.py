"""The admin's lists with 100,000 rows: a fixed number of queries per page, the large JSON columns never
read for the list, the page's rows only (no count or aggregate that joins every row).

Asserted on queries, not on time: what makes a list slow (a GROUP BY over every session, a per-row query,
megabytes of client metadata loaded per row) shows in the SQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.models import Field, Model
from django.db.models.fields import AutoFieldMixin
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from mcp_server.ledger import State, request_key
from mcp_server.models import LedgerEntry, Session

ROWS = 100_000
SESSIONS = "/admin/mcp_server/session/"
REQUESTS = "/admin/mcp_server/ledgerentry/"
MAX_QUERIES = 12
"""Session, user and permissions of the admin request, the page, its count, the filters' and the date
hierarchy's queries: a constant, whatever the number of rows."""

BIG = {"experimental": {"blob": "x" * 200_000}}
"""A client's 200 kB of capabilities (before MAX_CLIENT_METADATA_BYTES, any size could be stored)."""


@pytest.fixture(scope="module")
def many_sessions(django_db_setup: Any, django_db_blocker: Any) -> Iterator[list[str]]:
    """100,000 sessions, the 20 most recently seen carrying large client metadata; each has an answered
    ledger row, every tenth and those 20 a pending one too. Made once for the module; yields the ids of
    the 20."""
    with django_db_blocker.unblock():
        heavy = create_sessions()
        try:
            yield heavy
        finally:
            with connection.cursor() as cursor:  # no ORM cascade to walk: the tables are emptied
                cursor.execute(f"DELETE FROM {LedgerEntry._meta.db_table}")
                cursor.execute(f"DELETE FROM {Session._meta.db_table}")


def create_sessions() -> list[str]:
    now = timezone.now()
    sessions: list[dict[str, Any]] = [
        {
            "id": f"s{n:06d}",
            "protocol_version": "2025-11-25" if n % 2 else "2025-06-18",
            "client_name": "flood",
            "client_info": {"name": "flood", "version": "1"},
            "client_capabilities": {},
            "created": now,
            "last_seen": now - timedelta(seconds=ROWS - n),
        }
        for n in range(ROWS)
    ]
    heavy = sessions[-20:]
    for session in heavy:
        session["client_capabilities"] = BIG
        session["client_info"] = {"name": "heavy", "version": "1", "blob": "y" * 100_000}
    insert_rows(Session, sessions)
    entries = [
        {
            "session_id": session["id"],
            "request_key": request_key(k),
            "method": "tools/call",
            "worker": "w",
            "created": now - timedelta(seconds=ROWS - n),
            "state": State.PENDING if k else State.ANSWERED,
            "outcome": None if k else {"result": {"blob": "z" * 50_000}} if n >= ROWS - 20 else {"result": 1},
        }
        for n, session in enumerate(sessions)
        for k in range(2 if n % 10 == 0 or n >= ROWS - 20 else 1)
    ]
    insert_rows(LedgerEntry, entries)
    return [session["id"] for session in heavy]


def insert_rows(model: type[Model], rows: list[dict[str, Any]]) -> None:
    """``rows`` of ``model`` (by attribute name, each row the same ones; the other fields take their
    defaults, an automatic primary key its next value), each value prepared for the database by its field,
    in one ``executemany`` (``bulk_create`` spends most of a minute on 200,000 rows, in SQLite's batches of
    999 parameters)."""
    db = connections[DEFAULT_DB_ALIAS]
    fields = [f for f in model._meta.concrete_fields if not isinstance(f, AutoFieldMixin)]
    given = [f for f in fields if f.attname in rows[0]]
    defaults = [f.get_db_prep_save(f.get_default(), db) for f in fields if f.attname not in rows[0]]
    prepared: dict[tuple[str, int], tuple[Any, Any]] = {}  # a value object many rows share, prepared once

    def value(field: Field[Any, Any], raw: Any) -> Any:
        key = (field.attname, id(raw))
        if key not in prepared:
            prepared[key] = (raw, field.get_db_prep_save(raw, db))  # (raw kept: its id stays its own)
        return prepared[key][1]

    quote = db.ops.quote_name
    columns = ", ".join(quote(f.column) for f in [*given, *(f for f in fields if f not in given)])
    sql = f"INSERT INTO {quote(model._meta.db_table)} ({columns}) VALUES ({', '.join(['%s'] * len(fields))})"
    values = [[*(value(f, row[f.attname]) for f in given), *defaults] for row in rows]
    with transaction.atomic(), db.cursor() as cursor:  # one commit, not one per row
        cursor.executemany(sql, values)


def selects_of(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if q["sql"].lstrip().upper().startswith("SELECT")]


@pytest.mark.django_db
def test_the_session_list_with_100000_rows(
    admin_client: Client, many_sessions: list[str], django_assert_max_num_queries: Any
) -> None:
    admin_client.get(SESSIONS)  # warm the admin's own caches (content types, permissions)
    with django_assert_max_num_queries(MAX_QUERIES), CaptureQueriesContext(connection) as queries:
        response = admin_client.get(SESSIONS)
    assert response.status_code == 200
    listed = response.context["cl"].result_list
    assert [s.pk for s in listed[:20]] == many_sessions[::-1]  # most recently seen first
    assert {s.pk: s.pending_count for s in listed[:20]} == dict.fromkeys(many_sessions, 1)
    selects = selects_of(queries)
    for column in ("client_capabilities", "client_info", "subscriptions"):
        assert not [sql for sql in selects if column in sql], f"{column} was read for the list"
    # No join of every session with the ledger (a GROUP BY over the whole table), no date hierarchy (a
    # DISTINCT over every row's truncated date).
    assert not [sql for sql in selects if "GROUP BY" in sql.upper() and "LIMIT" not in sql.upper()]
    assert not [sql for sql in selects if "trunc" in sql.lower()]
    assert len(response.content) < 1_000_000  # none of the 20 x 300 kB made it into the page
    # Filters still work at that size (and still do not read the large columns).
    with django_assert_max_num_queries(MAX_QUERIES), CaptureQueriesContext(connection) as queries:
        filtered = admin_client.get(SESSIONS, {"protocol_version": "2025-06-18", "ended_at__isempty": "1"})
    assert filtered.status_code == 200
    assert all(s.protocol_version == "2025-06-18" for s in filtered.context["cl"].result_list)
    assert not [sql for sql in selects_of(queries) if "client_capabilities" in sql]


@pytest.mark.django_db
def test_a_session_page_still_shows_its_metadata(admin_client: Client, many_sessions: list[str]) -> None:
    page = admin_client.get(f"{SESSIONS}{many_sessions[0]}/change/")
    assert page.status_code == 200
    assert "experimental" in page.content.decode()


@pytest.mark.django_db
def test_the_request_list_with_100000_sessions(
    admin_client: Client, many_sessions: list[str], django_assert_max_num_queries: Any
) -> None:
    admin_client.get(REQUESTS)
    with django_assert_max_num_queries(MAX_QUERIES), CaptureQueriesContext(connection) as queries:
        response = admin_client.get(REQUESTS)
    assert response.status_code == 200
    rows = response.context["cl"].result_list
    assert rows[0].state == State.PENDING  # pending first
    assert not [sql for sql in selects_of(queries) if "outcome" in sql], "outcomes were read for the list"
    assert len(response.content) < 1_000_000
