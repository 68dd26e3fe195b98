"""A new session's row, stored with one prepared ``INSERT``: what ``Session.objects.create()`` does, without
compiling the statement again for every ``initialize`` (the ORM's save was about a sixth of a handshake's CPU
in a py-spy profile, most of it building the same SQL)."""

from __future__ import annotations

from typing import Any

from django.db import connections, router
from django.db.models.signals import post_save, pre_save

from .models import Session

__all__ = ["insert_session"]


class _SessionInsert:
    """The statement and its fields, built once per connection (a connection lives in one thread)."""

    def __init__(self, connection: Any) -> None:
        meta = Session._meta
        self.fields = list(meta.local_concrete_fields)
        quote = connection.ops.quote_name
        columns = ", ".join(quote(field.column) for field in self.fields)
        placeholders = ", ".join(["%s"] * len(self.fields))
        self.sql = f"INSERT INTO {quote(meta.db_table)} ({columns}) VALUES ({placeholders})"


def insert_session(session: Session) -> None:
    """Insert ``session``'s row (in the caller's thread), as ``session.save(force_insert=True)`` would: each
    field's ``pre_save`` (``created`` set now) and database preparation, ``pre_save`` and ``post_save`` sent
    when something listens; the database's errors are Django's."""
    alias = router.db_for_write(Session, instance=session)
    connection: Any = connections[alias]
    plan: _SessionInsert | None = getattr(connection, "_mcp_session_insert", None)
    if plan is None:
        plan = connection._mcp_session_insert = _SessionInsert(connection)
    if pre_save.has_listeners(Session):
        pre_save.send(sender=Session, instance=session, raw=False, using=alias, update_fields=None)
    values = [field.get_db_prep_save(field.pre_save(session, True), connection) for field in plan.fields]
    with connection.cursor() as cursor:
        cursor.execute(plan.sql, values)
    session._state.adding = False
    session._state.db = alias
    if post_save.has_listeners(Session):
        post_save.send(
            sender=Session, instance=session, created=True, update_fields=None, raw=False, using=alias
        )
