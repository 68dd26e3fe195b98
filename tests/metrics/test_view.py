"""``/metrics`` in process, through Django's test client: who may read it (``METRICS_ACCESS``: staff 403,
token 401, addresses 403), the checks of its setting, and what a scrape reads of the ledger, the same as the
admin's live page shows."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from mcp_server.admin_live.snapshot import abuild_snapshot
from mcp_server.checks import check_metrics_access
from mcp_server.metrics.access import access_problem
from mcp_server.metrics.figures import bounded_names
from mcp_server.models import Task
from tests.admin.test_admin import make_entry, make_session

URL = "/metrics"
TOKEN = "s3cret-scrape-token-0123456789"


@pytest.fixture
def access(settings: Any) -> Any:
    def set_access(value: Any) -> None:
        settings.MCP_SERVER = {**settings.MCP_SERVER, "METRICS_ACCESS": value}

    return set_access


def get(client: Client | None = None, **extra: Any) -> Any:
    return (client or Client()).get(URL, **extra)


# -- the guard --------------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_staff_only_by_default(settings: Any, django_user_model: Any) -> None:
    settings.MCP_SERVER = {k: v for k, v in settings.MCP_SERVER.items() if k != "METRICS_ACCESS"}
    assert get().status_code == 403  # anonymous
    member = django_user_model.objects.create_user(username="member", password="pw")
    client = Client()
    client.force_login(member)
    refused = get(client)
    assert refused.status_code == 403
    assert refused.content == b"Forbidden: the metrics are for staff.\n"
    staff = django_user_model.objects.create_user(username="staff", password="pw", is_staff=True)
    client.force_login(staff)
    assert get(client).status_code == 200
    staff.is_active = False
    staff.save()
    assert get(client).status_code == 403  # signed out with the deactivation


@pytest.mark.django_db(transaction=True)
def test_a_bearer_token(access: Any) -> None:
    access({"token": TOKEN})
    for header in (None, "Bearer wrong", f"Basic {TOKEN}", TOKEN, f"Bearer {TOKEN}x"):
        refused = get(**({"HTTP_AUTHORIZATION": header} if header else {}))
        assert refused.status_code == 401, header
        assert refused["WWW-Authenticate"] == 'Bearer realm="metrics"'
    assert get(HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200
    assert get(HTTP_AUTHORIZATION=f"bearer {TOKEN}").status_code == 200  # the scheme is case-insensitive


@pytest.mark.django_db(transaction=True)
def test_hostile_credentials_get_a_401_never_a_500(access: Any) -> None:
    """Bytes no token has (latin-1, NUL), a 64 KB header, the token in the query string
    or twice in the header: each refused with 401, the query string ignored."""
    access({"token": TOKEN})
    hostile = [f"Bearer {TOKEN}\u00e9", "Bearer \x00", "Bearer " + "x" * 65536,
               f"Bearer {TOKEN} {TOKEN}", "Bearer", " ", "\u00ff\u00fe"]  # fmt: skip
    for header in hostile:
        refused = get(HTTP_AUTHORIZATION=header)
        assert refused.status_code == 401, header[:40]
    assert Client().get(f"{URL}?token={TOKEN}&access_token={TOKEN}").status_code == 401
    assert get(HTTP_AUTHORIZATION=f"Bearer {TOKEN}", QUERY_STRING="x=\x00&" + "y" * 10000).status_code == 200


@pytest.mark.django_db(transaction=True)
def test_addresses_and_networks(access: Any) -> None:
    access({"ips": ["127.0.0.1", "10.0.0.0/8", "2001:db8::/32"]})
    for address in ("127.0.0.1", "10.20.30.40", "::ffff:127.0.0.1", "2001:db8::7"):
        assert get(REMOTE_ADDR=address).status_code == 200, address
    for address in ("127.0.0.2", "192.168.1.1", "::1", "", "not-an-address"):
        refused = get(REMOTE_ADDR=address)
        assert refused.status_code == 403, address
        assert refused.content == b"Forbidden: the metrics are not served to this address.\n"


def test_a_malformed_setting_refuses_everyone(access: Any) -> None:
    access({"ips": ["127.0.0.1"], "token": TOKEN})  # one form only
    refused = get(HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert refused.status_code == 403
    assert b"METRICS_ACCESS" in refused.content


def test_only_get_and_head(access: Any) -> None:
    access({"ips": ["127.0.0.1"]})
    assert Client().post(URL).status_code == 405


def test_off_when_telemetry_is_off(settings: Any) -> None:
    settings.MCP_SERVER = {**settings.MCP_SERVER, "TELEMETRY": False}
    off = get()  # the demo's setting: loopback may read
    assert off.status_code == 404
    assert b"Prometheus metrics are off" in off.content


@pytest.mark.parametrize(
    "value",
    [
        None,
        "admin",
        {},
        {"token": ""},
        {"token": " padded "},
        {"token": 7},
        {"ips": []},
        {"ips": "127.0.0.1"},
        {"ips": ["127.0.0.1", "localhost"]},
        {"ips": ["127.0.0.1"], "token": TOKEN},
        {"staff": True},
    ],
)
def test_e051_refuses_a_malformed_setting(access: Any, value: Any) -> None:
    access(value)
    assert [m.id for m in check_metrics_access()] == ["mcp_server.E051"]


@pytest.mark.parametrize(
    "value", ["staff", {"token": TOKEN}, {"ips": ["::1", "10.0.0.0/8", "192.168.0.7/24"]}]
)
def test_e051_accepts_the_three_forms(access: Any, value: Any) -> None:
    access(value)
    assert check_metrics_access() == []
    assert access_problem(value) is None


# -- what a scrape reads ----------------------------------------------------------------------------------


def samples(text: str) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append(sample)
    return found


@pytest.mark.django_db(transaction=True)
def test_a_scrape_reads_the_ledger_as_the_live_page_does() -> None:
    session = make_session("s-metrics")
    make_entry(1, session=session, name="slow", age=42)
    make_entry(2, session=session, name="slow", age=3)
    make_entry(3, session=session, method="resources/read", name="library://books/1", age=1)
    make_entry(4, session=session, state="answered", name="echo")
    make_session("s-ended", ended_at=timezone.now())
    now = timezone.now()
    for status in (Task.Status.WORKING, Task.Status.COMPLETED):
        Task.objects.create(
            id=f"t-{status}", owner="anonymous", tool="slow", status=status, created=now, updated=now
        )
    response = get()
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    found = samples(response.content.decode())
    pending = {
        (s.labels["mcp_method_name"], s.labels["gen_ai_tool_name"]): s.value
        for s in found["mcp_server_pending_requests"]
    }
    assert pending == {("tools/call", "slow"): 2, ("resources/read", ""): 1}  # a URI is never a label
    snapshot = async_to_sync(abuild_snapshot)()
    assert sum(pending.values()) == snapshot["pending_total"] == 3
    (oldest,) = found["mcp_server_oldest_pending_request_age_seconds"]
    assert 42 <= oldest.value < 60
    assert [s.value for s in found["mcp_server_open_sessions"]] == [1]
    assert [s.value for s in found["mcp_server_live_tasks"]] == [1]
    assert "mcp_server_ledger_writer_queue" in found
    assert "mcp_server_ledger_writer_lag_seconds" in found


@pytest.mark.django_db(transaction=True)
def test_openmetrics_when_asked() -> None:
    response = get(HTTP_ACCEPT="application/openmetrics-text; version=1.0.0")
    assert response["Content-Type"].startswith("application/openmetrics-text")
    assert response.content.endswith(b"# EOF\n")


def test_a_scrape_holds_a_bounded_number_of_client_given_names() -> None:
    counts = {("tools/call", f"tool_{n}"): n + 1 for n in range(10)}
    bounded = bounded_names(counts, limit=4)
    assert len(bounded) == 4
    assert sum(bounded.values()) == sum(counts.values())
    assert bounded[("_OTHER", "_OTHER")] == sum(range(1, 8))
    assert ("tools/call", "tool_9") in bounded
