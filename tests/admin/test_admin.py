"""The admin in process: listings, filters, search, read-only pages, permissions, the live page's socket."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser, Permission
from django.core.cache import caches
from django.test import Client
from django.utils import timezone

from mcp_server.admin_live.consumer import LiveConsumer
from mcp_server.admin_live.operations import aabort_requests, aborted_response
from mcp_server.admin_live.snapshot import SnapshotSource, percentile, snapshots
from mcp_server.core.records import long_id_of
from mcp_server.ledger import LedgerRecord, State, get_ledger, request_key
from mcp_server.models import LedgerEntry, Session
from mcp_server.protocol.settlement import PendingRequest
from mcp_server.runtime import Runtime
from mcp_server.wire.errors import REQUEST_ABORTED

CHANGELIST = "/admin/mcp_server/ledgerentry/"
SESSIONS = "/admin/mcp_server/session/"
LIVE = "/admin/mcp_server/ledgerentry/live/"
ABORT = "/admin/mcp_server/ledgerentry/live/abort/"


def make_session(session_id: str = "s-admin", **extra: Any) -> Session:
    now = timezone.now()
    fields = {
        "protocol_version": "2025-11-25",
        "client_name": "probe",
        "client_version": "1.2",
        "last_seen": now,
    }
    return Session.objects.create(id=session_id, **{**fields, **extra})


def make_entry(
    request_id: int | str,
    *,
    session: Session | None = None,
    state: str = State.PENDING,
    method: str = "tools/call",
    name: str = "slow",
    age: float = 5.0,
    **extra: Any,
) -> LedgerEntry:
    created = timezone.now() - timedelta(seconds=age)
    settled = state != State.PENDING
    return LedgerEntry.objects.create(
        session=session,
        request_key=request_key(request_id),
        long_id=long_id_of(request_id, request_key(request_id)),
        method=method,
        name=name,
        worker="host:1:abc",
        created=created,
        state=state,
        settled_at=created + timedelta(seconds=1) if settled else None,
        outcome={"result": True} if settled else None,
        **extra,
    )


def user_with(django_user_model: Any, name: str, *perms: str, staff: bool = True) -> Any:
    user = django_user_model.objects.create_user(username=name, password="pw", is_staff=staff)
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return user


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def listed(response: Any) -> list[str | int]:
    assert response.status_code == 200
    return [entry.request_id for entry in response.context["cl"].result_list]


def action_names(response: Any) -> set[str]:
    form = response.context["action_form"]
    return {name for name, _label in form.fields["action"].choices if name} if form else set()


# -- model admins -----------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_pending_entries_come_first(admin_client: Client) -> None:
    session = make_session()
    make_entry(1, session=session, state=State.ANSWERED, age=1)
    make_entry(2, session=session, age=100)
    make_entry(3, session=session, state=State.CANCELLED, age=2)
    make_entry(4, session=session, age=50)
    response = admin_client.get(CHANGELIST)
    assert listed(response) == [4, 2, 1, 3]
    page = response.content.decode()
    for column in ("field-age", "field-method", "field-handler", "field-session_link", "field-worker_id"):
        assert column in page
    assert "Pending requests (live)" in page


@pytest.mark.django_db
def test_filters_by_state_method_and_age(admin_client: Client) -> None:
    make_entry(1, age=10)
    make_entry(2, method="resources/read", name="test://x", age=300)
    make_entry(3, state=State.ABORTED, age=7200)
    assert set(listed(admin_client.get(CHANGELIST, {"state": "pending"}))) == {1, 2}
    assert listed(admin_client.get(CHANGELIST, {"state": "aborted"})) == [3]
    assert listed(admin_client.get(CHANGELIST, {"method": "resources/read"})) == [2]
    assert listed(admin_client.get(CHANGELIST, {"age": "1m"})) == [1]
    assert listed(admin_client.get(CHANGELIST, {"age": "10m"})) == [2]
    assert listed(admin_client.get(CHANGELIST, {"age": "older"})) == [3]


@pytest.mark.django_db
def test_search_by_request_id_method_and_session(admin_client: Client) -> None:
    first, second = make_session("s-first-1234"), make_session("s-second-5678")
    make_entry("req-alpha", session=first)
    make_entry(77, session=second, method="prompts/get", name="summarize")
    assert listed(admin_client.get(CHANGELIST, {"q": "alpha"})) == ["req-alpha"]
    assert listed(admin_client.get(CHANGELIST, {"q": "77"})) == [77]
    assert listed(admin_client.get(CHANGELIST, {"q": "prompts/get"})) == [77]
    assert listed(admin_client.get(CHANGELIST, {"q": "s-first"})) == ["req-alpha"]


@pytest.mark.django_db
def test_the_list_names_the_oauth_client_and_finds_its_requests(admin_client: Client) -> None:
    make_entry(1, oauth_client_id="dcr-client-9f3a", oauth_client_name="Claude")
    make_entry(2)  # an mcp_ token's or a session's request: no OAuth client
    page = admin_client.get(CHANGELIST).content.decode()
    assert '<span class="mcp-cut mcp-oauth" title="OAuth client dcr-client-9f3a">via Claude</span>' in page
    assert listed(admin_client.get(CHANGELIST, {"q": "Claude"})) == [1]
    assert listed(admin_client.get(CHANGELIST, {"q": "dcr-client-9f3a"})) == [1]


@pytest.mark.django_db
def test_a_long_id_is_listed_and_found_whole(admin_client: Client) -> None:
    """An id past the request id column (keyed by its hash) shows as itself, and is found by any part of it,
    its end included (which the stored key's prefix does not hold)."""
    long_id = "L" * 300 + "-tail-9"
    make_entry(long_id, session=make_session())
    make_entry("short")
    assert listed(admin_client.get(CHANGELIST, {"q": "-tail-9"})) == [long_id]
    assert listed(admin_client.get(CHANGELIST, {"q": "LLLL"})) == [long_id]


@pytest.mark.django_db
def test_entries_and_sessions_are_read_only(admin_client: Client) -> None:
    session = make_session()
    entry = make_entry(1, session=session)
    change = admin_client.get(f"{CHANGELIST}{entry.pk}/change/")
    assert change.status_code == 200
    assert 'name="_save"' not in change.content.decode()
    assert admin_client.post(f"{CHANGELIST}{entry.pk}/change/", {"method": "x"}).status_code == 403
    assert admin_client.get(f"{CHANGELIST}add/").status_code == 403
    assert admin_client.get(f"{CHANGELIST}{entry.pk}/delete/").status_code == 403
    assert admin_client.get(f"{SESSIONS}{session.pk}/delete/").status_code == 403
    assert 'name="_save"' not in admin_client.get(f"{SESSIONS}{session.pk}/change/").content.decode()
    actions = action_names(admin_client.get(CHANGELIST))
    assert actions == {"abort_requests"}
    assert action_names(admin_client.get(SESSIONS)) == {"end_sessions"}


@pytest.mark.django_db
def test_sessions_show_their_pending_count(admin_client: Client) -> None:
    busy, idle = make_session("s-busy", client_name="busy-client"), make_session("s-idle")
    make_entry(1, session=busy)
    make_entry(2, session=busy)
    make_entry(3, session=busy, state=State.ANSWERED)
    make_entry(4, session=idle, state=State.CLOSED)
    response = admin_client.get(SESSIONS)
    counts = {s.pk: s.pending_count for s in response.context["cl"].result_list}
    assert counts == {"s-busy": 2, "s-idle": 0}
    page = response.content.decode()
    for column in ("field-client_name", "field-client_version", "field-protocol_version", "field-transport"):
        assert column in page
    assert "field-pending_requests" in page


@pytest.mark.django_db
def test_app_index_links_the_live_page(admin_client: Client) -> None:
    page = admin_client.get("/admin/mcp_server/").content.decode()
    assert f'href="{LIVE}"' in page
    live = admin_client.get(LIVE)
    assert live.status_code == 200
    body = live.content.decode()
    assert 'data-websocket-path="/mcp-admin/live/"' in body
    assert "/static/mcp_server/live.js" in body
    assert "cdn" not in body.lower()
    assert 'id="mcp-live-abort"' in body


# -- permissions ------------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_anonymous_and_non_staff_are_sent_to_the_login_page(client: Client, django_user_model: Any) -> None:
    for who in (client, signed_in(user_with(django_user_model, "member", staff=False))):
        for url in (LIVE, CHANGELIST, SESSIONS):
            response = who.get(url)
            assert response.status_code == 302
            assert "/admin/login/" in response["Location"]
        assert who.post(ABORT, {"pk": ["1"]}).status_code == 302


@pytest.mark.django_db
def test_staff_without_the_view_permission_is_refused(django_user_model: Any) -> None:
    staff = signed_in(user_with(django_user_model, "staff"))
    assert staff.get(LIVE).status_code == 403
    assert staff.get(CHANGELIST).status_code == 403
    assert staff.get(SESSIONS).status_code == 403
    assert 'href="/admin/mcp_server/ledgerentry/live/"' not in staff.get("/admin/").content.decode()


@pytest.mark.django_db
def test_view_permission_sees_but_cannot_act(django_user_model: Any) -> None:
    entry = make_entry(1)
    viewer = signed_in(
        user_with(django_user_model, "viewer", "mcp_server.view_ledgerentry", "mcp_server.view_session")
    )
    live = viewer.get(LIVE)
    assert live.status_code == 200
    assert 'data-can-abort="0"' in live.content.decode()
    assert 'id="mcp-live-abort"' not in live.content.decode()
    assert action_names(viewer.get(CHANGELIST)) == set()
    assert action_names(viewer.get(SESSIONS)) == set()
    assert viewer.post(ABORT, {"pk": [str(entry.pk)]}).status_code == 403
    denied = viewer.post(CHANGELIST, {"action": "abort_requests", "_selected_action": [str(entry.pk)]})
    assert denied.status_code == 200  # the admin re-shows the list: "No action selected"
    assert LedgerEntry.objects.get(pk=entry.pk).state == State.PENDING


@pytest.mark.django_db
def test_change_permission_may_abort(django_user_model: Any) -> None:
    entry = make_entry(1)
    operator = signed_in(user_with(django_user_model, "operator", "mcp_server.change_ledgerentry"))
    assert "abort_requests" in action_names(operator.get(CHANGELIST))
    assert 'data-can-abort="1"' in operator.get(LIVE).content.decode()
    assert operator.post(ABORT, {"pk": [str(entry.pk)]}).json() == {"aborted": [entry.pk], "skipped": []}
    stored = LedgerEntry.objects.get(pk=entry.pk)
    assert stored.state == State.ABORTED
    assert stored.outcome == {"error": {"code": REQUEST_ABORTED, "message": "Request aborted by an operator"}}


# -- the operation itself ---------------------------------------------------------------------------------


@pytest.fixture(params=["database", "cache"])
def ledger_backend(request: pytest.FixtureRequest, settings: Any) -> Iterator[str]:
    paths = {
        "database": "mcp_server.stores.ledger.database.DatabaseLedger",
        "cache": "mcp_server.stores.ledger.cache.CacheLedger",
    }
    caches["default"].clear()
    settings.MCP_SERVER = {**settings.MCP_SERVER, "LEDGER_BACKEND": paths[request.param]}
    yield request.param
    caches["default"].clear()


@pytest.mark.django_db(transaction=True)
async def test_abort_delivers_exactly_one_reply_to_the_held_request(ledger_backend: str) -> None:
    """The abort reaches the worker holding the request (here, a runtime of this process) over the channel
    layer; that worker's settlement is the one reply, and a second abort finds nothing left to abort."""
    runtime = Runtime(ledger=get_ledger(), flush_interval=0)
    await runtime.start()
    delivered: list[dict[str, Any] | None] = []

    async def deliver(entry: PendingRequest, response: dict[str, Any] | None) -> None:
        delivered.append(response)

    entry = await runtime.requests.open("s-op", 9, "tools/call", deliver, name="slow")
    try:
        aborted = await aabort_requests([entry.record.pk, entry.record.pk])
        assert [r.request_id for r in aborted] == [9]
        assert delivered == [aborted_response(9)]
        assert delivered[0]["error"]["code"] == REQUEST_ABORTED
        ok = {"jsonrpc": "2.0", "id": 9, "result": {}}
        assert not await runtime.requests.settle(entry, State.ANSWERED, ok)
        assert await aabort_requests([entry.record.pk]) == []
        assert len(delivered) == 1
        stored = await get_ledger().aget(entry.record)
        assert stored is not None
        assert stored.state == State.ABORTED
    finally:
        await runtime.aclose()


@pytest.mark.django_db(transaction=True)
async def test_abort_skips_settled_and_unknown_requests(ledger_backend: str) -> None:
    ledger = get_ledger()
    record = await ledger.aopen(LedgerRecord(session_id="s-op", request_key=request_key(3), method="ping"))
    assert await ledger.asettle(record, State.ANSWERED, {"result": True})
    assert await aabort_requests([record.pk, 123456]) == []


def test_percentile_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50
    assert percentile(values, 95) == 95
    assert percentile(values, 99) == 99
    assert percentile([7.0], 99) == 7
    assert percentile([], 50) is None


# -- the live page's socket -------------------------------------------------------------------------------


async def connect_as(user: Any) -> tuple[bool, WebsocketCommunicator]:
    communicator = WebsocketCommunicator(LiveConsumer.as_asgi(), "/mcp-admin/live/")
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    return connected, communicator


@pytest.mark.django_db(transaction=True)
async def test_socket_refuses_anyone_but_staff_with_the_view_permission(django_user_model: Any) -> None:
    from asgiref.sync import sync_to_async

    member = await sync_to_async(user_with)(
        django_user_model, "ws-member", "mcp_server.view_ledgerentry", staff=False
    )
    staff = await sync_to_async(user_with)(django_user_model, "ws-staff")
    inactive = await sync_to_async(user_with)(django_user_model, "ws-gone", "mcp_server.view_ledgerentry")
    inactive.is_active = False
    await inactive.asave()
    for user in (AnonymousUser(), member, staff, inactive):
        connected, communicator = await connect_as(user)
        assert not connected, user
        await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_socket_sends_snapshots_to_a_viewer(django_user_model: Any) -> None:
    from asgiref.sync import sync_to_async

    viewer = await sync_to_async(user_with)(django_user_model, "ws-viewer", "mcp_server.view_ledgerentry")
    session = await sync_to_async(make_session)("s-live", client_name="inspector", client_version="0.9")
    entry = await sync_to_async(make_entry)(
        5, session=session, name="slow", age=3, oauth_client_id="cid-7", oauth_client_name="Claude"
    )
    await sync_to_async(make_entry)(6, session=session, state=State.ANSWERED, age=30)
    await sync_to_async(make_entry)(7, session=session, state=State.RATE_LIMITED, age=20)
    snapshots.reset()
    connected, communicator = await connect_as(viewer)
    assert connected
    try:
        snapshot = await communicator.receive_json_from(timeout=5)
        assert snapshot["type"] == "snapshot"
        assert snapshot["can_abort"] is False
        assert snapshot["pending_total"] == 1
        (row,) = snapshot["pending"]
        assert row["pk"] == entry.pk
        assert row["id"] == "5"
        assert row["name"] == "slow"
        assert row["client"] == "inspector 0.9"
        assert (row["oauth_client"], row["oauth_client_id"]) == ("Claude", "cid-7")
        assert row["age"] >= 3
        assert len(snapshot["history"]) == 60
        assert snapshot["history"][-1]["pending"] == 1
        assert sum(m["throughput"] for m in snapshot["history"]) == 2
        assert sum(m["rate_limited"] for m in snapshot["history"]) == 1  # refusals: their own outcome
        assert snapshot["recent"] == {
            "seconds": 60.0,
            "settled": 2,
            "rate_limited": 1,
            "p50": 1000.0,
            "p95": 1000.0,
            "p99": 1000.0,
        }
        await communicator.send_json_to({"type": "refresh"})
        assert (await communicator.receive_json_from(timeout=5))["type"] == "snapshot"
    finally:
        await communicator.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_the_routed_socket_checks_origin_and_session(django_user_model: Any) -> None:
    from asgiref.sync import sync_to_async
    from django.core.asgi import get_asgi_application

    from mcp_server.routing import mcp_application

    application = mcp_application(get_asgi_application())
    viewer = await sync_to_async(user_with)(django_user_model, "ws-routed", "mcp_server.view_ledgerentry")
    client = Client()
    await sync_to_async(client.force_login)(viewer)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()
    cases = [
        ([(b"origin", b"http://testserver")], False),  # anonymous
        ([(b"origin", b"http://evil.example"), (b"cookie", cookie)], False),  # another site
        ([(b"cookie", cookie)], False),  # no Origin at all
        ([(b"origin", b"http://testserver"), (b"cookie", cookie)], True),
    ]
    for headers, allowed in cases:
        communicator = WebsocketCommunicator(application, "/mcp-admin/live/", headers=headers)
        connected, _ = await communicator.connect()
        assert connected is allowed, headers
        await communicator.disconnect()


class CountingSource(SnapshotSource):
    """The real snapshot source, counting what the consumer asks of it; the first ``failures`` gets fail."""

    def __init__(self, failures: int = 0) -> None:
        super().__init__(fresh_for=0.0)
        self.failures = failures
        self.gets = 0
        self.resets = 0

    def reset(self) -> None:
        self.resets += 1
        super().reset()

    async def get(self) -> dict[str, Any]:
        self.gets += 1
        if self.gets <= self.failures:
            raise ConnectionError("the database went away")
        return await super().get()


async def connect_consumer(consumer: type[LiveConsumer], user: Any) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(consumer.as_asgi(), "/mcp-admin/live/")
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
    assert connected
    return communicator


@pytest.mark.django_db(transaction=True)
async def test_socket_ignores_anything_but_a_refresh(django_user_model: Any) -> None:
    from asgiref.sync import sync_to_async

    viewer = await sync_to_async(user_with)(django_user_model, "ws-ignored", "mcp_server.view_ledgerentry")

    class Quiet(LiveConsumer):  # one snapshot on connect, then only what a refresh asks for
        interval = 3600.0
        source = CountingSource()

    communicator = await connect_consumer(Quiet, viewer)
    try:
        assert (await communicator.receive_json_from(timeout=5))["type"] == "snapshot"
        for ignored in ({"type": "abort"}, ["refresh"], "refresh", {"kind": "refresh"}):
            await communicator.send_json_to(ignored)
        for frame in ({"text_data": "{not json"}, {"bytes_data": b'{"type": "refresh"}'}):
            await communicator.send_to(**frame)  # what is not JSON text: ignored, the socket stays open
        await communicator.send_json_to({"type": "refresh"})
        assert (await communicator.receive_json_from(timeout=5))["type"] == "snapshot"
    finally:
        # Returns once the consumer has handled the disconnect, and so (in order) every message before it.
        await communicator.disconnect()
    assert (Quiet.source.gets, Quiet.source.resets) == (2, 1)  # the connect's snapshot and the refresh's


@pytest.mark.django_db(transaction=True)
async def test_a_failed_snapshot_is_logged_and_the_next_one_is_sent(
    django_user_model: Any, caplog: pytest.LogCaptureFixture
) -> None:
    from asgiref.sync import sync_to_async

    viewer = await sync_to_async(user_with)(django_user_model, "ws-flaky", "mcp_server.view_ledgerentry")

    class Flaky(LiveConsumer):
        interval = 0.05
        source = CountingSource(failures=2)

    with caplog.at_level("ERROR", logger="mcp_server.admin"):
        communicator = await connect_consumer(Flaky, viewer)
        try:
            snapshot = await communicator.receive_json_from(timeout=5)
            assert snapshot["type"] == "snapshot"
            assert snapshot["can_abort"] is False
            assert Flaky.source.gets == 3
        finally:
            await communicator.disconnect()
    failures = [r for r in caplog.records if r.getMessage() == "live page snapshot failed"]
    assert len(failures) == 2
    assert all(r.exc_info and r.exc_info[0] is ConnectionError for r in failures)


@pytest.mark.django_db(transaction=True)
async def test_socket_follows_permission_changes_and_closes_when_watching_is_withdrawn(
    django_user_model: Any,
) -> None:
    from asgiref.sync import sync_to_async

    from mcp_server.admin_live.consumer import FORBIDDEN

    watcher = await sync_to_async(user_with)(django_user_model, "ws-demoted", "mcp_server.view_ledgerentry")

    class Rechecking(LiveConsumer):  # checks the permissions before every snapshot
        interval = 0.05
        recheck_every = 0.0

    def grant(codename: str) -> None:
        watcher.user_permissions.add(Permission.objects.get(codename=codename))

    def withdraw_all() -> None:
        watcher.user_permissions.clear()

    communicator = await connect_consumer(Rechecking, watcher)
    try:
        assert (await communicator.receive_json_from(timeout=5))["can_abort"] is False
        await sync_to_async(grant)("change_ledgerentry")
        async with asyncio.timeout(5):
            while not (await communicator.receive_json_from(timeout=5))["can_abort"]:
                pass  # snapshots sent before the next check still say False
        await sync_to_async(withdraw_all)()
        async with asyncio.timeout(5):
            while (output := await communicator.receive_output(timeout=5))["type"] == "websocket.send":
                pass  # snapshots sent before the next check
        assert output == {"type": "websocket.close", "code": FORBIDDEN}
    finally:
        await communicator.disconnect()
