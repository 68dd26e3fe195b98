"""From the admin to the trace: the requests list, a request's page and the live page's rows show each
request's trace id, linked through ``TRACE_URL``; the id alone without it; nothing without a span. Every
value is escaped, whatever the row holds."""

from __future__ import annotations

import html
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import Client

from mcp_server.admin_live.snapshot import abuild_snapshot
from mcp_server.checks import check_trace_url
from mcp_server.telemetry.links import trace_url

from .test_admin import make_entry

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"
JAEGER = "https://jaeger.example/trace/{trace_id}"
LIST = "/admin/mcp_server/ledgerentry/"


@pytest.fixture
def template(settings: Any) -> Any:
    def set_template(value: Any) -> None:
        settings.MCP_SERVER = {**settings.MCP_SERVER, "TRACE_URL": value}

    return set_template


@pytest.mark.django_db
def test_the_list_and_the_page_link_the_trace(admin_client: Client, template: Any) -> None:
    template(JAEGER)
    entry = make_entry(1, trace_id=TRACE, span_id=SPAN)
    make_entry(2)  # telemetry off: no span
    listed = admin_client.get(LIST).content.decode()
    link = f'href="https://jaeger.example/trace/{TRACE}"'
    assert listed.count(link) == 1
    assert f'title="trace {TRACE}" target="_blank" rel="noopener noreferrer">{TRACE[:8]}…</a>' in listed
    assert listed.count('class="mcp-trace"') == 1  # the row without a span shows none
    page = admin_client.get(f"{LIST}{entry.pk}/change/").content.decode()
    assert f'{link} title="trace {TRACE}" target="_blank" rel="noopener noreferrer">{TRACE}</a>' in page
    assert SPAN in page  # the span id, as it is


@pytest.mark.django_db
def test_without_a_template_the_id_alone(admin_client: Client, template: Any) -> None:
    template(None)
    make_entry(1, trace_id=TRACE, span_id=SPAN)
    listed = admin_client.get(LIST).content.decode()
    assert f'<span class="mcp-trace" title="trace {TRACE}">{TRACE[:8]}…</span>' in listed
    assert "jaeger" not in listed


@pytest.mark.django_db
def test_every_value_is_escaped(admin_client: Client, template: Any) -> None:
    template("https://tempo.example/explore?q={trace_id}&span={span_id}")
    hostile = '"><script>alert(1)</script>'
    entry = make_entry(1, trace_id=hostile[:32], span_id="&amp;<b>x")
    page = admin_client.get(f"{LIST}{entry.pk}/change/").content.decode()
    assert "<script>alert(1)" not in page
    url = trace_url(hostile[:32], "&amp;<b>x")
    assert url == (
        "https://tempo.example/explore?q=%22%3E%3Cscript%3Ealert%281%29%3C%2Fscript%3E&span=%26amp%3B%3Cb%3Ex"
    )
    assert f'href="{html.escape(url)}"' in page
    assert html.escape(hostile[:32]) in page


@pytest.mark.django_db(transaction=True)
def test_the_live_pages_rows_carry_the_id_and_the_link(template: Any) -> None:
    template("https://ui.honeycomb.io/team/environments/prod/trace?trace_id={trace_id}&span={span_id}")
    make_entry(1, trace_id=TRACE, span_id=SPAN)
    make_entry(2)
    rows = {row["id"]: row for row in async_to_sync(abuild_snapshot)()["pending"]}
    assert rows["1"]["trace_id"] == TRACE
    assert rows["1"]["trace_url"] == (
        f"https://ui.honeycomb.io/team/environments/prod/trace?trace_id={TRACE}&span={SPAN}"
    )
    assert (rows["2"]["trace_id"], rows["2"]["trace_url"]) == ("", None)
    template(None)
    (first, _second) = async_to_sync(abuild_snapshot)()["pending"]
    assert (first["trace_id"], first["trace_url"]) == (TRACE, None)


GRAFANA = 'https://grafana.example/explore?left={"datasource":"tempo","queries":[{"query":"{trace_id}"}]}'


@pytest.mark.parametrize(
    "value", [None, JAEGER, "http://127.0.0.1:16686/trace/{trace_id}?span={span_id}", GRAFANA]
)
def test_e052_accepts_a_url_with_the_trace_id(template: Any, value: Any) -> None:
    template(value)
    assert check_trace_url() == []


@pytest.mark.parametrize(
    "value",
    [
        "https://jaeger.example/trace/",  # no {trace_id}
        "javascript:alert('{trace_id}')",
        "/trace/{trace_id}",  # not absolute
        "ftp://traces.example/{trace_id}",
        "https://[::1/{trace_id}",
        7,
        ["https://jaeger.example/trace/{trace_id}"],
    ],
)
def test_e052_refuses_anything_else(template: Any, value: Any) -> None:
    template(value)
    assert [m.id for m in check_trace_url()] == ["mcp_server.E052"]
    assert trace_url(TRACE) is None  # and no link is made of it
