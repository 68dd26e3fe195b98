"""The database event store (default): one :class:`~mcp_server.models.StreamEvent` row per event."""

from __future__ import annotations

from datetime import datetime

from django.db import connections, router, transaction
from django.utils import timezone

from .base import EventStore, StoredEvent

__all__ = ["DatabaseEventStore"]


class DatabaseEventStore(EventStore):
    """Events as rows of :class:`~mcp_server.models.StreamEvent`."""

    def write(self, events: list[StoredEvent]) -> None:
        from ...models import StreamEvent

        # One INSERT through the cursor (executemany): no model instances, no per-field preparation.
        connection = connections[router.db_for_write(StreamEvent)]
        quote = connection.ops.quote_name
        columns = ("session_id", "stream_id", "seq", "request_key", "data", "last", "created")
        sql = "INSERT INTO {} ({}) VALUES ({})".format(
            quote(StreamEvent._meta.db_table),
            ", ".join(quote(c) for c in columns),
            ", ".join(["%s"] * len(columns)),
        )
        now = connection.ops.adapt_datetimefield_value(timezone.now())
        rows = [
            (
                e.session_id,
                e.stream_id,
                e.seq,
                e.request_key[:200],
                e.data,
                e.last,
                now if e.created is None else connection.ops.adapt_datetimefield_value(e.created),
            )
            for e in events
        ]
        with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
            cursor.executemany(sql, rows)
        limit = self.max_events
        high: dict[str, int] = {}
        for e in events:
            if e.seq > limit:
                high[e.stream_id] = max(high.get(e.stream_id, 0), e.seq)
        for stream_id, seq in high.items():  # trim: notifications past the limit (responses stay)
            StreamEvent.objects.filter(
                stream_id=stream_id, seq__gt=0, seq__lte=seq - limit, request_key=""
            ).delete()

    def events_after(self, session_id: str, stream_id: str, after: int) -> list[StoredEvent]:
        from ...models import StreamEvent

        rows = StreamEvent.objects.filter(session_id=session_id, stream_id=stream_id, seq__gt=after)
        return [
            StoredEvent(r.session_id, r.stream_id, r.seq, r.data, r.request_key, r.last, r.created)
            for r in rows.order_by("seq", "id")
        ]

    def streams_of(self, session_id: str, request_key: str) -> list[str]:
        from ...models import StreamEvent

        rows = StreamEvent.objects.filter(session_id=session_id, request_key=request_key, seq=0)
        return sorted(set(rows.values_list("stream_id", flat=True)))

    def prune(self, before: datetime) -> int:
        from ...models import StreamEvent

        deleted, _ = StreamEvent.objects.filter(created__lt=before).delete()
        return deleted
