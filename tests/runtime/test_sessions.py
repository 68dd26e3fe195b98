"""Sessions in this process: a site without a channel layer still ends them (across processes, live:
``tests/end_to_end/test_sessions.py``)."""

from __future__ import annotations

import pytest


@pytest.mark.django_db(transaction=True)
async def test_a_site_without_a_channel_layer_still_ends_its_sessions() -> None:
    """A single-process site may configure no channel layer: nobody else is there to tell."""
    from django.test import override_settings
    from django.utils import timezone

    from mcp_server.models import Session
    from mcp_server.sessions import aend_session
    from mcp_server.transports.signals import asend_to_session

    await Session.objects.acreate(id="s-alone", protocol_version="2025-11-25", last_seen=timezone.now())
    with override_settings(MCP_SERVER={"CHANNEL_LAYER": "not-configured"}):
        await asend_to_session("s-alone", {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        assert await aend_session("s-alone", "session terminated by the client")
        assert not await aend_session("s-alone", "again")
    row = await Session.objects.aget(pk="s-alone")
    assert row.ended_at is not None
    assert row.end_reason == "session terminated by the client"
