"""How the database ledger's writer inserts a batch of records: one plan per connection, which reads each
record's columns once and converts only what the backend needs converted."""

from __future__ import annotations

import operator
import sqlite3
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from functools import partial
from itertools import chain
from typing import Any

import orjson
from django.db.models import JSONField

from ...core.records import NAME_LENGTH, LedgerRecord

__all__ = [
    "COLUMNS",
    "VENDORS",
    "InsertPlan",
    "column_values",
    "datetime_adapter",
    "insert_plan",
    "json_adapter",
    "row_values",
]

VENDORS = ("postgresql", "sqlite")
"""The backends an :class:`InsertPlan` writes for (any other inserts through Django's ``bulk_create``)."""

COLUMNS = (
    "session_id",
    "request_key",
    "method",
    "name",
    "user_id",
    "worker",
    "channel",
    "created",
    "deadline",
    "lease_expires",
    "state",
    "settled_at",
    "outcome",
    "protocol_version",
    "round_of",
    "client",
    "long_id",
    "oauth_client_id",
    "oauth_client_name",
    "trace_id",
    "span_id",
)
"""The columns a batch writes, in ``LedgerRecord``'s names (they are the model's attribute names too)."""

MOST_ROWS = 32
"""The most rows one SQLite ``INSERT`` of a batch takes (fewer where SQLite allows fewer parameters): each
chunk's parameters are made and bound under the interpreter lock, ~0.1 ms for 32 rows, before SQLite's
step lets go of it; a whole batch at once held it for a millisecond, and the event loop's p99 at c16
rose by a third."""

_UTC_TEXT = "replace(rtrim(%s, 'Z'), 'T', ' ')"
"""orjson's text of a UTC datetime (``2026-12-06T20:40:26.375338Z``) as Django stores it on SQLite
(``2026-12-06 20:40:26.375338``)."""

_COLUMN_VALUES = operator.attrgetter(*COLUMNS)
"""A record's values of :data:`COLUMNS`, as a tuple."""

_NAME = COLUMNS.index("name")


def column_values(record: LedgerRecord) -> tuple[Any, ...]:
    """A record's values of :data:`COLUMNS`, unconverted, the name cut to its column (only a name too long
    for it is copied)."""
    row: tuple[Any, ...] = _COLUMN_VALUES(record)
    name = row[_NAME]
    if len(name) > NAME_LENGTH:
        row = (*row[:_NAME], name[:NAME_LENGTH], *row[_NAME + 1 :])
    return row


class InsertPlan:
    """How a batch of records becomes ``INSERT`` statements on one connection, each record's ``pk`` set from
    them: the column list, and per column the one conversion its values need there (datetimes and JSON
    through the backend's own adapters; text and integers as they are). Built once per connection, not per
    row; the way a batch is written is chosen then, by the backend (:data:`VENDORS`):

    - PostgreSQL: one statement whatever the batch's size, its rows passed as one JSON array of rows that
      the server unpacks (``INSERT ... SELECT ... FROM jsonb_array_elements(%s::jsonb) RETURNING``), written
      by orjson in one call. The driver's own array parameters (``UNNEST``, as Django's ``bulk_create`` does)
      are dumped element by element in Python, a regular expression for each text: ~60 µs a row, held under
      the interpreter lock in stretches past its 5 ms switch interval, which stalled the event loop. A batch
      orjson will not write (an integer past 64 bits, a key that is no text, a lone surrogate), or a JSON
      column with a field of its own (a subclass that prepares its values, an encoder), goes that way;
    - SQLite: chunks of rows, each one ``INSERT ... VALUES (...), (...)`` (:meth:`_write_rows`), when the
      connection is in UTC and the JSON columns are Django's own; else one row statement run for each row
      (``executemany``). The ids are counted back from the last. (The JSON way, ``INSERT ... SELECT ...
      FROM json_each(?)``, was measured on 2026-12-06: SQLite 3.40 parses a row's JSON again for each of
      its 21 columns, 15 µs of CPU a row against ~3 for a row of ``VALUES``.)
    """

    def __init__(self, model: Any, connection: Any) -> None:
        meta = model._meta
        fields = [meta.get_field(column) for column in COLUMNS]
        quote = connection.ops.quote_name
        head = f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(f.column) for f in fields)})"
        adapt_datetime = datetime_adapter(connection)
        self._converted: list[tuple[int, Callable[[Any], Any]]] = []
        for index, field in enumerate(fields):
            kind = field.get_internal_type()
            if kind == "DateTimeField":
                self._converted.append((index, adapt_datetime))
            elif kind == "JSONField":
                self._converted.append((index, json_adapter(field, connection)))
            # text and integer columns (keys included) are stored as the record holds them
        # orjson writes a JSON column's value as Django's own field, with no encoder of its own, would
        json_as_is = all(_plain_json(field) for field in fields if field.get_internal_type() == "JSONField")
        self._write: Callable[[Any, list[LedgerRecord]], Iterable[Any]]
        if connection.vendor == "postgresql":
            # Each value typed as its column without a length (varchar, not varchar(200)): a value too long
            # is refused as a plain insert refuses it, never cut by the cast.
            types = [field.db_type(connection).split("(")[0] for field in fields]
            arrays = ", ".join(f"(%s)::{kind}[]" for kind in types)
            self._unnest_sql = f"{head} SELECT * FROM UNNEST({arrays}) RETURNING {quote('id')}"
            self._sql = f"{head} SELECT {_json_columns(types)} FROM jsonb_array_elements(%s::jsonb) AS r(row)"
            self._sql += f" RETURNING {quote('id')}"
            self._write = self._write_json if json_as_is else self._write_unnest
        else:
            self._sql = f"{head} VALUES ({', '.join(['%s'] * len(fields))})"
            self._write = self._write_sequential
            if json_as_is and _sqlite_in_utc(connection):
                self._sqlite_rows(head, [field.get_internal_type() for field in fields], connection)

    def _sqlite_rows(self, head: str, kinds: list[str], connection: Any) -> None:
        """Set SQLite's batch up as rows of ``VALUES`` lists (:meth:`_write_rows`)."""
        self._head = head
        self._row = "(" + ", ".join(_UTC_TEXT if kind == "DateTimeField" else "%s" for kind in kinds) + ")"
        self._width = len(kinds)
        self._datetimes = [i for i, kind in enumerate(kinds) if kind == "DateTimeField"]
        self._json_texts = [(i, convert) for i, convert in self._converted if kinds[i] == "JSONField"]
        limit = connection.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
        self._most_rows = 1 << (max(1, min(MOST_ROWS, limit // self._width)).bit_length() - 1)
        self._statements: dict[int, tuple[str, str]] = {}
        self._write = self._write_rows

    def values(self, record: LedgerRecord) -> list[Any]:
        """One record's parameters, in column order (the columns read at once, only the datetimes and the
        JSON converted; the name cut to its column)."""
        row = list(column_values(record))
        for index, convert in self._converted:
            value = row[index]
            if value is not None:
                row[index] = convert(value)
        return row

    def insert(self, cursor: Any, records: list[LedgerRecord]) -> None:
        """Insert ``records`` through ``cursor`` (a cursor of the plan's connection, in a transaction) and set
        each one's ``pk``."""
        for record, pk in zip(records, self._write(cursor, records), strict=True):
            record.pk = pk

    def _write_json(self, cursor: Any, records: list[LedgerRecord]) -> list[Any]:
        """PostgreSQL: the batch as one JSON parameter (the columns as the record holds them: orjson writes
        datetimes as ISO 8601 with their offset, which ``timestamptz`` reads; ``None`` is SQL ``NULL``)."""
        try:
            payload = orjson.dumps(list(map(column_values, records))).decode()
        except TypeError:  # (orjson.JSONEncodeError) a value orjson will not write: the arrays take it
            return self._write_unnest(cursor, records)
        cursor.execute(self._sql, [payload])
        return [pk for (pk,) in cursor.fetchall()]

    def _write_unnest(self, cursor: Any, records: list[LedgerRecord]) -> list[Any]:
        rows = [self.values(record) for record in records]
        cursor.execute(self._unnest_sql, [list(column) for column in zip(*rows, strict=True)])
        return [pk for (pk,) in cursor.fetchall()]

    def _write_rows(self, cursor: Any, records: list[LedgerRecord]) -> range:
        """SQLite: the batch in chunks of up to :data:`MOST_ROWS` rows, each one ``INSERT ... VALUES`` list
        (by powers of two, so that sqlite3 keeps each size's statement compiled) whose parameters are made
        in C: orjson writes the chunk (a datetime in UTC as ``...T...Z``, which the statement turns into
        Django's text of it) and reads it back as plain values. ``executemany`` took the interpreter lock
        back at every row's step and converted each row in Python in between: at c1 the writer's thread
        spent ~57 µs of CPU a request on it, the event loop more on handing the lock over; this way, ~35.
        A chunk with a datetime other than an aware UTC one, or a value orjson will not write, goes row by
        row. The ids are counted back from the last, as :meth:`_write_sequential` counts them."""
        execute = cursor.execute
        raw = not (cursor.db.queries_logged or cursor.db.execute_wrappers)
        if raw:  # nobody watches the statements: sqlite3's own execute (Django's scans the text for "%s")
            execute = partial(sqlite3.Cursor.execute, cursor.cursor)
        done = 0
        while done < len(records):
            size = min(self._most_rows, 1 << ((len(records) - done).bit_length() - 1))
            chunk = records[done : done + size]
            params = self._row_params(chunk)
            if params is None:
                self._insert_each(cursor, chunk)
            else:
                with cursor.db.wrap_database_errors:  # (sqlite3's errors as Django's, as its cursor does)
                    execute(self._rows_statement(size)[raw], params)
            done += size
        return self._last_ids(cursor, len(records))

    def _row_params(self, records: list[LedgerRecord]) -> list[Any] | None:
        """The parameters of rows ``records``, flat, or ``None`` when they are not all plain values."""
        rows = [list(column_values(record)) for record in records]
        if not self._utc_only(rows):
            return None
        for index, to_text in self._json_texts:  # the JSON columns as their text (json_adapter) first
            for row in rows:
                if row[index] is not None:
                    row[index] = to_text(row[index])
        try:
            plain = orjson.loads(orjson.dumps(rows, option=orjson.OPT_UTC_Z))
        except TypeError:  # (orjson.JSONEncodeError) a value orjson will not write
            return None
        return list(chain.from_iterable(plain))

    def _rows_statement(self, size: int) -> tuple[str, str]:
        """The ``INSERT`` of ``size`` rows, with Django's placeholders and with sqlite3's."""
        statement = self._statements.get(size)
        if statement is None:
            text = f"{self._head} VALUES {', '.join([self._row] * size)}"
            statement = self._statements[size] = (text, text.replace("%s", "?"))
        return statement

    def _utc_only(self, rows: list[list[Any]]) -> bool:
        """Whether every datetime of ``rows`` is an aware UTC one (or ``None``)."""
        return all(row[i] is None or _aware_utc(row[i]) for row in rows for i in self._datetimes)

    def _write_sequential(self, cursor: Any, records: list[LedgerRecord]) -> range:
        """``executemany``: sqlite3's own loop, which lets go of the interpreter lock at each row's step and
        reads each row's parameters only then (unless the connection logs its queries). Within one write
        transaction an ``AUTOINCREMENT`` key takes the next ids in turn: nobody else can insert in between."""
        self._insert_each(cursor, records)
        return self._last_ids(cursor, len(records))

    def _insert_each(self, cursor: Any, records: list[LedgerRecord]) -> None:
        """One row statement for each record (``executemany``)."""
        rows: Iterable[list[Any]] = map(self.values, records)
        if cursor.db.queries_logged:  # (Django's debug cursor counts the rows it is given)
            rows = list(rows)
        cursor.executemany(self._sql, rows)

    @staticmethod
    def _last_ids(cursor: Any, count: int) -> range:
        """The ids of the last ``count`` rows inserted through ``cursor`` in this transaction."""
        cursor.execute("SELECT last_insert_rowid()")
        last = int(cursor.fetchone()[0])
        return range(last - count + 1, last + 1)


def _json_columns(types: list[str]) -> str:
    """The select list that reads each column off a JSON row ``r.row`` (its ``i``-th element), cast to the
    column's type; JSON's ``null`` is SQL ``NULL`` (``->>`` gives it for text, ``NULLIF`` for a JSON column,
    as Django stores ``None`` in a ``JSONField``)."""
    return ", ".join(
        f"NULLIF(r.row -> {i}, 'null'::jsonb)" if kind == "jsonb" else f"(r.row ->> {i})::{kind}"
        for i, kind in enumerate(types)
    )


def _plain_json(field: Any) -> bool:
    """Whether a JSON field stores what orjson writes: Django's own field, with no encoder of its own."""
    return not _prepares_its_own_way(field) and field.encoder is None


def _prepares_its_own_way(field: Any) -> bool:
    """Whether a JSON field is a subclass that prepares its values other than Django's ``JSONField`` does."""
    kind = type(field)
    return any(getattr(kind, name) is not getattr(JSONField, name) for name in _JSON_PREP)


def row_values(record: LedgerRecord) -> dict[str, Any]:
    """A record's column values by model attribute name (the name cut to its column), unconverted: what
    Django's own ``bulk_create`` takes."""
    return dict(zip(COLUMNS, column_values(record), strict=True))


def _prep_save(field: Any, connection: Any, value: Any) -> Any:
    return field.get_db_prep_save(value, connection)


def datetime_adapter(connection: Any) -> Callable[[Any], Any]:
    """What a datetime becomes as a parameter on ``connection``: the backend's own adapter, but on SQLite
    with the connection in UTC (``USE_TZ``, no database ``TIME_ZONE``: Django's default) an aware UTC value
    (what the ledger's clock gives) goes straight to the text the adapter would make of it
    (``make_naive`` to UTC, then ``str``); any other value goes through the adapter."""
    adapt: Callable[[Any], Any] = connection.ops.adapt_datetimefield_value
    if not _sqlite_in_utc(connection):
        return adapt

    def sqlite_utc(value: Any) -> Any:
        if _aware_utc(value):  # "+00:00" off its ISO text: str() of naive
            return value.isoformat(" ")[:-6]
        return adapt(value)

    return sqlite_utc


def _sqlite_in_utc(connection: Any) -> bool:
    """Whether ``connection`` is SQLite's with its time zone UTC (``USE_TZ``, no database ``TIME_ZONE``:
    Django's default), where an aware UTC datetime's text is its naive ISO text."""
    return connection.vendor == "sqlite" and connection.timezone is UTC


def _aware_utc(value: Any) -> bool:
    """Whether ``value`` is a plain ``datetime`` in UTC (what the ledger's clock gives)."""
    return type(value) is datetime and value.tzinfo is UTC


_JSON_PREP = ("get_db_prep_save", "get_db_prep_value", "get_prep_value")


def json_adapter(field: Any, connection: Any) -> Callable[[Any], Any]:
    """What a JSON value becomes as a parameter on ``connection``: the backend's ``adapt_json_value`` with
    the field's encoder, as ``JSONField.get_db_prep_save`` ends up calling it for a plain value (a field
    that prepares values its own way, a subclass, goes through ``get_db_prep_save``)."""
    if _prepares_its_own_way(field):
        return partial(_prep_save, field, connection)
    adapt = partial(_adapt_json, connection.ops.adapt_json_value, field.encoder)
    if connection.vendor == "sqlite" and field.encoder is None:  # the adapter's json.dumps, but in C
        return partial(_json_text, adapt)
    return adapt


def _adapt_json(adapt: Callable[[Any, Any], Any], encoder: Any, value: Any) -> Any:
    return adapt(value, encoder)


def _json_text(adapt: Callable[[Any], Any], value: Any) -> Any:
    """SQLite's text of a JSON value, written by orjson (compact, non-ASCII as it is: the same JSON as the
    standard library's text, at a fifth of its time); what orjson will not write (a key that is no text, an
    integer past 64 bits) goes to the backend's adapter."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # (orjson.JSONEncodeError)
        return adapt(value)


def insert_plan(model: Any, connection: Any) -> InsertPlan | None:
    """The connection's insert plan (kept on the connection object, which lives in one thread); ``None`` on a
    backend not among :data:`VENDORS`."""
    if connection.vendor not in VENDORS:
        return None
    plan: InsertPlan | None = getattr(connection, "_mcp_ledger_insert_plan", None)
    if plan is None:
        plan = InsertPlan(model, connection)
        connection._mcp_ledger_insert_plan = plan
    return plan
