"""How the database ledger's writer inserts a batch of records: one plan per connection, which reads each
record's columns once and converts only what the backend needs converted."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from functools import partial
from typing import Any

from django.db.models import JSONField

from ...core.records import NAME_LENGTH, LedgerRecord

__all__ = ["COLUMNS", "InsertPlan", "datetime_adapter", "insert_plan", "json_adapter"]

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

_COLUMN_VALUES = operator.attrgetter(*COLUMNS)
"""A record's values of :data:`COLUMNS`, as a tuple."""


class InsertPlan:
    """How a batch of records becomes ``INSERT ... RETURNING`` statements on one connection: the column
    list, and per column the one conversion its values need there (datetimes and JSON through the
    backend's own adapters; text and integers as they are). Built once per connection, not per row.

    On PostgreSQL a batch is one statement whatever its size, its rows passed as one array per column
    (``INSERT ... SELECT * FROM UNNEST(...)``, as Django's own ``bulk_create`` does there): the statement's
    text never changes, so the driver converts it once, where a multi-row ``VALUES`` list was parsed again
    for every batch. On SQLite, one row statement run for each row (``executemany``). Elsewhere, one
    multi-row ``VALUES ... RETURNING`` statement per chunk the backend allows.
    """

    def __init__(self, model: Any, connection: Any) -> None:
        meta = model._meta
        fields = [meta.get_field(column) for column in COLUMNS]
        quote = connection.ops.quote_name
        self.table = quote(meta.db_table)
        self.columns = ", ".join(quote(field.column) for field in fields)
        self.row_sql = "(" + ", ".join(["%s"] * len(fields)) + ")"
        self.returning = quote("id")
        self.rows_per_statement = max(1, connection.ops.bulk_batch_size(fields, [None] * 10_000))
        self.unnest_sql: str | None = None
        """PostgreSQL's one statement for any batch (``None`` elsewhere)."""
        self.sequential_ids = connection.vendor == "sqlite"
        """SQLite: the rows are inserted by one row statement run for each, their ids read from the last."""
        self.row_statement = f"INSERT INTO {self.table} ({self.columns}) VALUES {self.row_sql}"
        if connection.vendor == "postgresql":
            # Each array typed as its column without a length (varchar[], not varchar(200)[]): a value too
            # long is refused as a plain insert refuses it, never cut by the cast.
            arrays = ", ".join(f"(%s)::{field.db_type(connection).split('(')[0]}[]" for field in fields)
            self.unnest_sql = (
                f"INSERT INTO {self.table} ({self.columns}) SELECT * FROM UNNEST({arrays}) "
                f"RETURNING {self.returning}"
            )
        adapt_datetime = datetime_adapter(connection)
        self.converters: list[Callable[[Any], Any] | None] = []
        for field in fields:
            kind = field.get_internal_type()
            if kind == "DateTimeField":
                self.converters.append(adapt_datetime)
            elif kind == "JSONField":
                self.converters.append(json_adapter(field, connection))
            else:  # text and integer columns (keys included) are stored as the record holds them
                self.converters.append(None)
        self._sql: dict[int, str] = {}
        self._converted = [(index, convert) for index, convert in enumerate(self.converters) if convert]
        self._name = COLUMNS.index("name")

    def values(self, record: LedgerRecord) -> list[Any]:
        """One record's parameters, in column order (the columns read at once, only the datetimes and the
        JSON converted; the name cut to its column)."""
        row = list(_COLUMN_VALUES(record))
        for index, convert in self._converted:
            value = row[index]
            if value is not None:
                row[index] = convert(value)
        row[self._name] = row[self._name][:NAME_LENGTH]
        return row

    def insert(self, cursor: Any, records: list[LedgerRecord]) -> None:
        """Insert ``records`` through ``cursor`` (a cursor of the plan's connection, in a transaction) and set
        each one's ``pk``."""
        if self.unnest_sql is not None:
            rows = [self.values(record) for record in records]
            cursor.execute(self.unnest_sql, [list(column) for column in zip(*rows, strict=True)])
            pks: Iterable[Any] = [pk for (pk,) in cursor.fetchall()]
        elif self.sequential_ids:
            pks = self._insert_sequential(cursor, records)
        else:
            pks = []
            for start in range(0, len(records), self.rows_per_statement):
                chunk = records[start : start + self.rows_per_statement]
                params: list[Any] = []
                for record in chunk:
                    params += self.values(record)
                cursor.execute(self.sql(len(chunk)), params)
                pks += [pk for (pk,) in cursor.fetchall()]
        for record, pk in zip(records, pks, strict=True):
            record.pk = pk

    def _insert_sequential(self, cursor: Any, records: list[LedgerRecord]) -> range:
        """SQLite: one row statement run for every record (``executemany``: sqlite3's own loop, which lets go
        of the interpreter lock at each row's step, and reads each row's parameters only then, unless the
        connection logs its queries), then the ids from the last one. Within one write transaction an
        ``AUTOINCREMENT`` key takes the next ids in turn: nobody else can insert in between."""
        rows: Iterable[list[Any]] = map(self.values, records)
        if cursor.db.queries_logged:  # (Django's debug cursor counts the rows it is given)
            rows = list(rows)
        cursor.executemany(self.row_statement, rows)
        cursor.execute("SELECT last_insert_rowid()")
        last = int(cursor.fetchone()[0])
        return range(last - len(records) + 1, last + 1)

    def sql(self, rows: int) -> str:
        """The ``VALUES`` statement for ``rows`` rows (cached per size)."""
        statement = self._sql.get(rows)
        if statement is None:
            statement = self._sql[rows] = (
                f"INSERT INTO {self.table} ({self.columns}) VALUES {', '.join([self.row_sql] * rows)} "
                f"RETURNING {self.returning}"
            )
        return statement


def _prep_save(field: Any, connection: Any, value: Any) -> Any:
    return field.get_db_prep_save(value, connection)


def datetime_adapter(connection: Any) -> Callable[[Any], Any]:
    """What a datetime becomes as a parameter on ``connection``: the backend's own adapter, but on SQLite
    with the connection in UTC (``USE_TZ``, no database ``TIME_ZONE``: Django's default) an aware UTC value
    (what the ledger's clock gives) goes straight to the text the adapter would make of it
    (``make_naive`` to UTC, then ``str``); any other value goes through the adapter."""
    adapt: Callable[[Any], Any] = connection.ops.adapt_datetimefield_value
    if connection.vendor != "sqlite" or connection.timezone is not UTC:
        return adapt

    def sqlite_utc(value: Any) -> Any:
        if type(value) is datetime and value.tzinfo is UTC:  # "+00:00" off its ISO text: str() of naive
            return value.isoformat(" ")[:-6]
        return adapt(value)

    return sqlite_utc


_JSON_PREP = ("get_db_prep_save", "get_db_prep_value", "get_prep_value")


def json_adapter(field: Any, connection: Any) -> Callable[[Any], Any]:
    """What a JSON value becomes as a parameter on ``connection``: the backend's ``adapt_json_value`` with
    the field's encoder, as ``JSONField.get_db_prep_save`` ends up calling it for a plain value (a field
    that prepares values its own way, a subclass, goes through ``get_db_prep_save``)."""
    kind = type(field)
    if any(getattr(kind, name) is not getattr(JSONField, name) for name in _JSON_PREP):
        return partial(_prep_save, field, connection)
    return partial(_adapt_json, connection.ops.adapt_json_value, field.encoder)


def _adapt_json(adapt: Callable[[Any, Any], Any], encoder: Any, value: Any) -> Any:
    return adapt(value, encoder)


def insert_plan(model: Any, connection: Any) -> InsertPlan:
    """The connection's insert plan (kept on the connection object, which lives in one thread)."""
    plan: InsertPlan | None = getattr(connection, "_mcp_ledger_insert_plan", None)
    if plan is None:
        plan = InsertPlan(model, connection)
        connection._mcp_ledger_insert_plan = plan
    return plan
