"""The ledger's batch insert gives each record the id of its own row, however the backend returns ids (on
SQLite, counted back from the last one), with rows already there, gaps left by deleted ones, and a query
log on; and it stores every column as the record holds it, whichever way the batch goes (on PostgreSQL, one
JSON parameter, or the arrays for a batch orjson will not write). Run on PostgreSQL too."""

from __future__ import annotations

import zoneinfo
from datetime import UTC, datetime, timedelta, timezone
from types import SimpleNamespace
from typing import Any

import pytest
from django.db import connection, models, transaction
from django.test.utils import CaptureQueriesContext

from mcp_server.core.records import NAME_LENGTH, LedgerRecord
from mcp_server.models import LedgerEntry
from mcp_server.stores.ledger.database import DatabaseLedger
from mcp_server.stores.ledger.insert_plan import COLUMNS, InsertPlan
from tests.support.rerun import not_in_rerun, rerun_on_postgresql

pytestmark = pytest.mark.django_db(transaction=True)

NOW = datetime(2026, 12, 6, 3, 0, tzinfo=UTC)


def records(prefix: str, count: int) -> list[LedgerRecord]:
    return [
        LedgerRecord(
            session_id=None,
            request_key=f"s:{prefix}-{n}",
            method="tools/call",
            name=f"tool-{n}",
            worker="w",
            created=NOW,
            state="answered" if n % 3 else "pending",
            settled_at=NOW if n % 3 else None,
            outcome={"result": True, "n": n} if n % 3 else None,
        )
        for n in range(count)
    ]


def write(batch: list[LedgerRecord]) -> None:
    with transaction.atomic():
        assert DatabaseLedger().write_batch(batch, []) == []


def assert_each_row_is_its_own(batch: list[LedgerRecord]) -> None:
    rows = LedgerEntry.objects.in_bulk([r.pk for r in batch])
    assert len(rows) == len(batch)
    for record in batch:
        row = rows[record.pk]
        assert (row.request_key, row.name, row.state, row.outcome) == (
            record.request_key,
            record.name,
            record.state,
            record.outcome,
        )


@pytest.mark.parametrize("count", [1, 2, 57, 400])
def test_each_record_gets_the_id_of_its_row(count: int) -> None:
    write(records("before", 5))
    LedgerEntry.objects.filter(request_key__in=["s:before-3", "s:before-4"]).delete()  # the newest ids go
    batch = records("batch", count)
    write(batch)
    assert_each_row_is_its_own(batch)
    assert len({r.pk for r in batch}) == count


def test_the_same_with_the_query_log_on(settings: Any) -> None:
    batch = records("logged", 30)
    with CaptureQueriesContext(connection) as queries:  # Django's debug cursor: it counts the rows given
        write(batch)
    assert queries.captured_queries
    assert_each_row_is_its_own(batch)


# -- what each backend's way of writing stores --------------------------------------------------------------

LONG_NAME = "n" * 1000


def hostile_fields(n: int) -> dict[str, Any]:
    """Values a backend's conversion could get wrong: quotes, backslashes, braces and commas (an array
    literal's syntax), non-ASCII and line separators, JSON ``null`` inside and as the whole outcome, a
    name past its column, datetimes in other zones and without microseconds."""
    paris = datetime(2026, 6, 1, 12, 0, tzinfo=zoneinfo.ZoneInfo("Europe/Paris"))
    return {
        "session_id": None,
        "request_key": f's:"{n}",{{x}}\\',
        "method": "tools/call",
        "name": LONG_NAME if n == 0 else f"é \u2028 '{n}' NULL",
        "user_id": None if n % 2 else 7,
        "worker": "w,1",
        "channel": "" if n % 2 else "{}",
        "created": NOW,
        "deadline": paris if n % 2 else None,
        "lease_expires": datetime(2026, 12, 6, 4, 5, 6, 789, tzinfo=timezone(timedelta(hours=-3))),
        "state": "answered",
        "settled_at": NOW,
        "outcome": None if n == 1 else {"result": {"a": [1, 2.5, None, 'x\\y"z']}, "n": n},
        "round_of": "",
        "protocol_version": "2026-07-28",
        "client": 'bench "1.0"',
        "long_id": "",
        "oauth_client_id": "",
        "oauth_client_name": "",
        "trace_id": "0af7651916cd43dd8448eb211c80319c",
        "span_id": "b7ad6b7169203331",
    }


def stored(pk: Any) -> dict[str, Any]:
    return LedgerEntry.objects.filter(pk=pk).values(*COLUMNS).get()  # type: ignore[no-any-return]


def expected(fields: dict[str, Any]) -> dict[str, Any]:
    return {**fields, "name": fields["name"][:NAME_LENGTH]}


def test_every_column_is_stored_as_the_record_holds_it() -> None:
    batch = [LedgerRecord(**hostile_fields(n)) for n in range(4)]
    write(batch)
    for n, record in enumerate(batch):
        assert stored(record.pk) == expected(hostile_fields(n))
    assert stored(batch[1].pk)["outcome"] is None  # SQL NULL, as Django stores None
    assert LedgerEntry.objects.filter(pk=batch[1].pk, outcome__isnull=True).exists()


def test_a_batch_orjson_will_not_write_goes_through_the_arrays() -> None:
    """An integer past 64 bits and a key that is no text: orjson refuses them; the batch is written all the
    same, by the other way (each backend's)."""
    fields = [hostile_fields(n) for n in range(3)]
    fields[2]["outcome"] = {"result": {"big": 2**70, 3: "three"}}
    batch = [LedgerRecord(**f) for f in fields]
    write(batch)
    assert stored(batch[2].pk)["outcome"] == {"result": {"big": 2**70, "3": "three"}}
    assert [stored(r.pk)["request_key"] for r in batch] == [f["request_key"] for f in fields]


def inserts_of(batch: list[LedgerRecord]) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        write(batch)
    return [q["sql"] for q in queries.captured_queries if "INSERT INTO" in q["sql"]]


def test_a_batch_is_one_statement_on_postgresql_and_a_few_on_sqlite() -> None:
    """PostgreSQL: one ``INSERT`` whose rows it reads off one JSON parameter, however many. SQLite: rows of
    ``VALUES`` lists, chunks of up to ``MOST_ROWS`` by powers of two (50 rows: 32, 16 and 2)."""
    batch = records("few", 50)
    inserts = inserts_of(batch)
    if connection.vendor == "sqlite":
        assert [insert.count("), (") + 1 for insert in inserts] == [32, 16, 2]
    else:
        (insert,) = inserts
        assert "jsonb_array_elements" in insert
    assert_each_row_is_its_own(batch)


def test_a_chunk_with_a_datetime_not_in_utc_goes_row_by_row() -> None:
    """Only the chunk that holds it: the others are still rows of ``VALUES``, and every id is right."""
    batch = records("mixed", 40)
    batch[35].deadline = NOW.astimezone(timezone(timedelta(hours=2)))
    inserts = inserts_of(batch)
    if connection.vendor == "sqlite":
        assert [insert.count("), (") + 1 for insert in inserts] == [32, 1]  # the last 8: one executemany
        assert inserts[1].startswith("8 times: ")
    assert_each_row_is_its_own(batch)
    assert stored(batch[35].pk)["deadline"] == batch[35].deadline


DATETIMES = ("created", "deadline", "lease_expires", "settled_at")


@pytest.mark.parametrize(
    "moments",
    [
        [NOW, NOW.replace(microsecond=5), datetime(999, 1, 1, tzinfo=UTC), None],  # UTC only: orjson's text
        [NOW, NOW.replace(microsecond=123456), None, NOW.astimezone(timezone(timedelta(hours=5)))],
    ],
    ids=["utc", "one-not-utc"],
)
def test_a_datetime_is_stored_as_djangos_field_stores_it(moments: list[datetime | None]) -> None:
    """The text in the column is the text Django's own save writes (on SQLite, the adapter's shortcut for
    UTC; on PostgreSQL, orjson's text of each)."""
    batch = [
        LedgerRecord(**{**hostile_fields(n), **dict(zip(DATETIMES, moments, strict=True))}) for n in (2, 3)
    ]
    write(batch)
    text = "CAST({} AS TEXT)" if connection.vendor == "sqlite" else "{}"  # (sqlite3 would parse the text)
    columns = ", ".join(text.format(connection.ops.quote_name(name)) for name in DATETIMES)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {columns} FROM {LedgerEntry._meta.db_table} WHERE id = %s", [batch[0].pk])
        raw = cursor.fetchone()
    field = LedgerEntry._meta.get_field("created")
    made = [None if m is None else field.get_db_prep_save(m, connection) for m in moments]
    if connection.vendor == "sqlite":  # text: compared as text
        assert list(raw) == made
    else:
        assert list(raw) == moments
    assert [stored(batch[1].pk)[name] for name in DATETIMES] == moments


class Wrapped(models.JSONField):
    """A JSON field that prepares its values its own way."""

    def get_prep_value(self, value: Any) -> Any:
        return super().get_prep_value({"wrapped": value})


def test_a_json_column_that_prepares_its_own_values_is_prepared_by_it() -> None:
    """A ledger model whose JSON column is a field of the site's own: the batch goes through the field's
    preparation, not through orjson (which would store the value unprepared)."""

    def get_field(name: str) -> Any:
        if name != "outcome":
            return LedgerEntry._meta.get_field(name)
        field = Wrapped(null=True)
        field.set_attributes_from_name("outcome")
        return field

    model = SimpleNamespace(_meta=SimpleNamespace(db_table=LedgerEntry._meta.db_table, get_field=get_field))
    plan = InsertPlan(model, connection)
    batch = [LedgerRecord(**hostile_fields(n)) for n in range(3)]
    with transaction.atomic(), connection.cursor() as cursor:
        plan.insert(cursor, batch)
    assert stored(batch[2].pk)["outcome"] == {"wrapped": hostile_fields(2)["outcome"]}


@not_in_rerun
def test_the_same_on_postgresql() -> None:
    """PostgreSQL returns ids its own way and takes the batch as JSON: this file, run again there, must
    pass."""
    rerun_on_postgresql(__file__)
