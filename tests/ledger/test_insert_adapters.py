"""The ledger's batch insert converts its datetime and JSON columns as Django's fields do: the shortcuts
(an aware UTC datetime straight to SQLite's text, JSON through the backend's adapter) give exactly what
``get_db_prep_save`` gives, and anything else goes through Django's own code."""

from __future__ import annotations

import json
import zoneinfo
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import orjson
import pytest
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, models

from mcp_server.models import LedgerEntry
from mcp_server.stores.ledger.insert_plan import datetime_adapter, json_adapter

MOMENTS = [
    datetime(2026, 12, 4, 21, 5, 7, 123456, tzinfo=UTC),
    datetime(2026, 12, 4, 21, 5, 7, tzinfo=UTC),  # no microseconds: str() leaves them out, as Django does
    datetime(1999, 1, 1, tzinfo=UTC),
    datetime(2026, 12, 4, 22, 5, 7, tzinfo=timezone(timedelta(hours=1))),  # aware, not UTC
    datetime(2026, 6, 1, 12, 0, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")),
]


@pytest.mark.parametrize("moment", MOMENTS, ids=str)
def test_a_datetime_is_the_text_djangos_field_makes_of_it(moment: datetime) -> None:
    field = LedgerEntry._meta.get_field("created")
    assert datetime_adapter(connection)(moment) == field.get_db_prep_save(moment, connection)


def test_only_sqlite_in_utc_takes_the_shortcut(settings: Any) -> None:
    assert datetime_adapter(connection).__name__ == "sqlite_utc"
    settings.USE_TZ = False  # no time zone on the connection: the backend's adapter, as it is
    assert datetime_adapter(connection) == connection.ops.adapt_datetimefield_value
    with pytest.raises(ValueError, match="timezone-aware"):
        datetime_adapter(connection)(MOMENTS[0])  # as Django refuses it


@pytest.mark.parametrize(
    "value",
    [{"result": True}, {"error": {"code": -32603, "message": "é \u2028"}}, [1, 2.5, None], "text", 0],
    ids=repr,
)
def test_a_json_value_is_what_djangos_field_makes_of_it(value: Any) -> None:
    """The same JSON (on SQLite, orjson's compact text of it: the same value read back)."""
    field = LedgerEntry._meta.get_field("outcome")
    made, djangos = json_adapter(field, connection)(value), field.get_db_prep_save(value, connection)
    if connection.vendor == "sqlite":
        assert made == orjson.dumps(value).decode()
        assert json.loads(made) == json.loads(djangos) == value
    else:
        assert made == djangos


def test_what_orjson_will_not_write_goes_to_djangos_adapter() -> None:
    """A key that is no text and an integer past 64 bits: the standard library's text (keys as text)."""
    field = LedgerEntry._meta.get_field("outcome")
    value = {1: "one", "big": 2**70}
    assert json_adapter(field, connection)(value) == field.get_db_prep_save(value, connection)


class Upper(models.JSONField):
    """A JSON field that prepares its values its own way."""

    def get_prep_value(self, value: Any) -> Any:
        return {"wrapped": value}


def test_a_json_field_with_its_own_preparation_goes_through_it() -> None:
    field = Upper(encoder=DjangoJSONEncoder)
    field.set_attributes_from_name("outcome")
    assert json_adapter(field, connection)(Decimal("1.5")) == '{"wrapped": "1.5"}'
    plain = models.JSONField(encoder=DjangoJSONEncoder)
    assert json_adapter(plain, connection)(Decimal("1.5")) == '"1.5"'  # the field's encoder is used
