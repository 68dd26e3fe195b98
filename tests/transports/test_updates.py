"""Server-initiated notifications: ``resources/updated`` to subscribers, ``list_changed`` to every session, as
the channel layer carries them to the sessions' groups (through a live server to a client's stream:
``tests/end_to_end/test_updates.py``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.layers import get_channel_layer
from django.utils import timezone

from mcp_server.models import Session
from mcp_server.registry.server import MCPServer
from mcp_server.transports.signals import session_group
from mcp_server.updates import (
    anotify_list_changed,
    anotify_resource_updated,
    notify_list_changed,
    notify_resource_updated,
    watch_registry,
)


async def _session_row(
    session_id: str, server: str, *, ended: bool = False, uris: list[str] | None = None
) -> None:
    now = timezone.now()
    await Session.objects.acreate(
        id=session_id,
        server=server,
        protocol_version="2025-11-25",
        last_seen=now,
        ended_at=now if ended else None,
        subscriptions=uris or [],
    )


async def _listen(session_id: str) -> tuple[Any, str]:
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(session_group(session_id), channel)
    return layer, channel


@pytest.mark.django_db(transaction=True)
async def test_resource_updated_skips_ended_and_unsubscribed_sessions() -> None:
    await _session_row("live-subscribed", "default", uris=["test://a"])
    await _session_row("live-other", "default", uris=["test://b"])
    await _session_row("ended-subscribed", "default", ended=True, uris=["test://a"])
    layer, channel = await _listen("live-subscribed")
    assert await anotify_resource_updated("test://a") == 1
    event = await asyncio.wait_for(layer.receive(channel), 2)
    assert event["message"]["params"] == {"uri": "test://a"}


SENTINEL = {"type": "test.sentinel"}


async def _next_after_everything_sent(layer: Any, channel: str, session_id: str) -> dict[str, Any]:
    """The next event on ``channel``, after a sentinel sent to the session's group now.

    Call it once every notification that could still arrive has been sent: a duplicate would then come
    before the sentinel, so receiving the sentinel proves that nothing more was sent.
    """
    await layer.group_send(session_group(session_id), SENTINEL)
    event: dict[str, Any] = await asyncio.wait_for(layer.receive(channel), 2)
    return event


@pytest.mark.django_db(transaction=True)
async def test_list_changed_when_the_registry_changes_at_run_time() -> None:
    server = MCPServer("updates-test")
    watch_registry(server)
    watch_registry(server)  # idempotent: one notification per change, not two
    await _session_row("watching", server.key)
    await _session_row("gone", server.key, ended=True)
    layer, channel = await _listen("watching")

    @server.tool
    async def late_tool() -> str:
        """Registered while sessions are live."""
        return "late"

    event = await asyncio.wait_for(layer.receive(channel), 2)
    assert event["message"] == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    # Inside an event loop the listener sends from background tasks: once they are all done, everything
    # this registration caused has been sent.
    await asyncio.gather(*server.notifying)
    assert await _next_after_everything_sent(layer, channel, "watching") == SENTINEL
    with pytest.raises(ValueError, match="unknown feature"):
        await anotify_list_changed("roots", server)


@pytest.mark.django_db(transaction=True)
async def test_list_changed_from_synchronous_code_is_sent_before_the_call_returns() -> None:
    """Outside an event loop (a view, a management command) registering or removing sends at once."""
    server = MCPServer("updates-sync")
    watch_registry(server)
    await _session_row("sync-watching", server.key)
    layer, channel = await _listen("sync-watching")

    def change_registry() -> None:
        @server.prompt
        def greeting() -> str:
            return "hello"

        server.remove_prompt("greeting")

    await asyncio.to_thread(change_registry)
    prompts_changed = {"jsonrpc": "2.0", "method": "notifications/prompts/list_changed"}
    for _ in ("registered", "removed"):
        event = await asyncio.wait_for(layer.receive(channel), 2)
        assert event["message"] == prompts_changed
    assert await _next_after_everything_sent(layer, channel, "sync-watching") == SENTINEL
    assert "greeting" not in server.prompts


@pytest.mark.django_db(transaction=True)
async def test_changes_before_the_app_registry_is_ready_are_not_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    """While ``mcp.py`` modules are imported no session can exist: the listener sends nothing then."""
    from django.apps import apps

    server = MCPServer("updates-early")
    watch_registry(server)
    await _session_row("early", server.key)
    layer, channel = await _listen("early")
    monkeypatch.setattr(apps, "ready", False)

    def register() -> None:  # the synchronous path would send before returning
        @server.resource("test://early")
        def early() -> str:
            return "early"

    await asyncio.to_thread(register)
    monkeypatch.setattr(apps, "ready", True)
    assert "test://early" in server.resources
    assert await _next_after_everything_sent(layer, channel, "early") == SENTINEL


async def test_a_failed_list_changed_is_logged_and_the_registration_stands(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """No database here (pytest-django refuses access): sending fails, registering still succeeds."""
    server = MCPServer("updates-failing")
    watch_registry(server)

    def register() -> None:
        @server.tool
        def unlucky() -> str:
            return "registered anyway"

    with caplog.at_level("ERROR", logger="mcp_server.updates"):
        await asyncio.to_thread(register)
    assert "unlucky" in server.tools
    assert [r.getMessage() for r in caplog.records] == ["could not send tools list_changed"]


@pytest.mark.django_db(transaction=True)
async def test_synchronous_resource_updated_reaches_the_subscriber() -> None:
    await _session_row("sync-subscribed", "default", uris=["test://sync"])
    await _session_row("sync-unsubscribed", "default", uris=[])
    layer, channel = await _listen("sync-subscribed")
    assert await asyncio.to_thread(notify_resource_updated, "test://sync") == 1
    event = await asyncio.wait_for(layer.receive(channel), 2)
    assert event["message"] == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": "test://sync"},
    }
    assert await asyncio.to_thread(notify_list_changed, "resources") == 2
    event = await asyncio.wait_for(layer.receive(channel), 2)
    assert event["message"] == {"jsonrpc": "2.0", "method": "notifications/resources/list_changed"}
