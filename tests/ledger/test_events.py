"""The event stores: a stream's rows in order, bounded per stream, pruned past retention, and the -32000 a
survivor writes into the stream of a dead worker's request (:meth:`Upkeep.publish_orphan`)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.cache import caches
from django.utils import timezone

from mcp_server.core.records import LedgerRecord, request_key
from mcp_server.runtime.event_writer import EventWriter
from mcp_server.runtime.upkeep import ORPHAN_GAP, ORPHAN_REASON, Upkeep
from mcp_server.stores.events.base import EventStore, StoredEvent, keys_answered, parse_event_id
from mcp_server.stores.events.cache import CacheEventStore
from mcp_server.stores.events.database import DatabaseEventStore
from mcp_server.stores.ledger.database import DatabaseLedger

pytestmark = pytest.mark.django_db(transaction=True)

SESSION = "s-events"


@pytest.fixture(params=["database", "cache"])
def store(request: pytest.FixtureRequest) -> EventStore:
    caches["default"].clear()
    options = {"RETENTION": 60, "MAX_EVENTS": 5}
    return DatabaseEventStore(options) if request.param == "database" else CacheEventStore(options)


def rows(stream: str, count: int, *, key: str = "i:1") -> list[StoredEvent]:
    """The priming row of a stream carrying request ``key``, ``count`` notifications and the response."""
    notes = [StoredEvent(SESSION, stream, n, f'{{"n":{n}}}') for n in range(1, count + 1)]
    return [
        StoredEvent(SESSION, stream, 0, "", key),
        *notes,
        StoredEvent(SESSION, stream, count + 1, "{}", key),
    ]


def test_parse_event_id() -> None:
    stream = "p" + "0a" * 16
    assert parse_event_id(f"{stream}:12") == (stream, 12)
    assert parse_event_id(f" g{'f' * 32}:0 ") == (f"g{'f' * 32}", 0)
    assert parse_event_id("nonsense") is None
    assert parse_event_id("p:x") is None
    assert parse_event_id(":3") is None
    # only the ids this server issues: nothing else reaches a store key or a channel-layer group name
    for stream_part in ("p0a1", "p!", "p/x", "p@x", "p%41", "p a", "p\xe9", stream.upper(), "x" + stream[1:]):
        assert parse_event_id(f"{stream_part}:1") is None, stream_part
    for seq in ("\u0661", "\xb2", "1" * 19, "-1", "+1", "1 2"):
        assert parse_event_id(f"{stream}:{seq}") is None, seq


async def test_a_stream_is_read_after_an_id_and_bounded(store: EventStore) -> None:
    writer = EventWriter(store, interval=0.01)
    for event in rows("p1", 12):
        writer.add(event)
    writer.add(StoredEvent(SESSION, "p2", 1, "other stream"))
    await writer.flush()
    await writer.aclose()
    after = await store.aevents_after(SESSION, "p1", 3)
    # MAX_EVENTS 5: the last five are kept (notifications 1..8 trimmed), and the opening row
    assert [e.seq for e in after] == [9, 10, 11, 12, 13]
    assert after[-1].request_key == "i:1"
    everything = await store.aevents_after(SESSION, "p1", -1)
    assert [e.seq for e in everything] == [0, 9, 10, 11, 12, 13]
    assert keys_answered(everything) == ({"i:1"}, {"i:1"}, False)
    assert await store.aevents_after("another-session", "p1", -1) == []
    assert await store.astreams_of(SESSION, "i:1") == ["p1"]


async def test_pruned_past_retention() -> None:
    store = DatabaseEventStore({"RETENTION": 60, "MAX_EVENTS": 100})
    old = [StoredEvent(SESSION, "p3", n, created=timezone.now() - timedelta(seconds=120)) for n in (0, 1)]
    await store.awrite([*old, StoredEvent(SESSION, "p3", 2)])
    assert await store.aprune(timezone.now() - timedelta(seconds=60)) == 2
    assert [e.seq for e in await store.aevents_after(SESSION, "p3", -1)] == [2]


async def test_an_orphan_32000_ends_its_stream(store: EventStore) -> None:
    await store.awrite(rows("p4", 2, key="i:7")[:-1])  # opened, two notifications, no response: it died
    woken: list[str] = []

    async def wake(stream_id: str) -> None:
        woken.append(stream_id)

    upkeep = Upkeep(DatabaseLedger({}), "survivor", events=store, wake=wake)
    record = LedgerRecord(session_id=SESSION, request_key=request_key(7), method="tools/call", worker="dead")
    reply = {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": -32000, "message": f"Connection closed: {ORPHAN_REASON}"},
    }
    await upkeep.publish_orphan(record, reply)
    await upkeep.publish_orphan(record, reply)  # a second settlement attempt writes nothing more
    tail = await store.aevents_after(SESSION, "p4", 2)
    assert [(e.seq, e.last) for e in tail] == [(2 + ORPHAN_GAP, False), (3 + ORPHAN_GAP, True)]
    assert '"code":-32000' in tail[0].data
    assert woken == ["p4"]
