"""MCP Apps in the admin: the ledger's list and the live page mark a call of a tool with a view, and a call
made by a view (a tool with ``visibility=["app"]``, which no model is shown)."""

from __future__ import annotations

import pytest
from django.test import Client

from mcp_server.admin_live.snapshot import abuild_snapshot
from mcp_server.admin_live.ui_tools import ui_kind
from tests.admin.test_admin import CHANGELIST, make_entry, make_session


def test_ui_kind_of_the_demo_tools() -> None:
    assert ui_kind("tools/call", "reserve_copy") == "app"
    assert ui_kind("tools/call", "search_books") == "view"
    assert ui_kind("tools/call", "get_book") == ""
    assert ui_kind("tools/call", "no_such_tool") == ""
    assert ui_kind("resources/read", "search_books") == ""


@pytest.mark.django_db
def test_the_ledger_list_marks_view_calls(admin_client: Client) -> None:
    session = make_session()
    make_entry(1, session=session, name="reserve_copy")
    make_entry(2, session=session, name="search_books")
    make_entry(3, session=session, name="get_book")
    page = admin_client.get(CHANGELIST).content.decode()
    assert 'reserve_copy</span> <span class="mcp-ui mcp-ui-app">by a view</span>' in page
    assert 'search_books</span> <span class="mcp-ui mcp-ui-view">has a view</span>' in page
    assert page.count('class="mcp-ui ') == 2


@pytest.mark.django_db(transaction=True)
async def test_the_live_snapshot_marks_view_calls() -> None:
    from asgiref.sync import sync_to_async

    session = await sync_to_async(make_session)("s-apps")
    await sync_to_async(make_entry)(7, session=session, name="reserve_copy")
    await sync_to_async(make_entry)(8, session=session, name="echo")
    snapshot = await abuild_snapshot(history=[])
    marks = {row["name"]: row["ui"] for row in snapshot["pending"]}
    assert marks == {"reserve_copy": "app", "echo": ""}
