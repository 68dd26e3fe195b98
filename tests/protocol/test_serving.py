"""``protocol/serving.py`` without a live server: ``initialize`` answered and recorded whatever happens."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_server.models import LedgerEntry, Session
from mcp_server.protocol.serving import answer_initialize
from mcp_server.registry.server import MCPServer
from mcp_server.runtime import Runtime
from mcp_server.wire.jsonrpc import JSONRPCRequest

pytestmark = pytest.mark.django_db(transaction=True)

PARAMS = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}


def initialize(params: dict[str, Any], request_id: int = 1) -> JSONRPCRequest:
    return JSONRPCRequest(jsonrpc="2.0", id=request_id, method="initialize", params=params)


class NotAUser:
    """Claims to be authenticated but is no ``User``: storing the session fails (a real ORM error)."""

    is_authenticated = True
    pk = 7


async def test_initialize_opens_a_session_and_records_the_request() -> None:
    runtime = Runtime(flush_interval=0)
    response, session = await answer_initialize(runtime, MCPServer("serving"), initialize(PARAMS), user=None)
    assert response["result"]["protocolVersion"] == "2025-11-25"
    assert session is not None
    assert await Session.objects.filter(pk=session.id, server="serving").aexists()
    assert len(runtime.sessions) == 1  # cached at once: its first request needs no database read
    states = [row.state async for row in LedgerEntry.objects.filter(session_id=session.id)]
    assert states == ["answered"]


async def test_a_failure_while_storing_the_session_is_answered_minus_32603() -> None:
    runtime = Runtime(flush_interval=0)
    response, session = await answer_initialize(
        runtime, MCPServer("serving"), initialize(PARAMS, 2), user=NotAUser()
    )
    assert session is None
    assert response == {
        "jsonrpc": "2.0",
        "id": 2,
        "error": {"code": -32603, "message": "Internal error during initialize"},
    }
    assert not await Session.objects.aexists()
    assert len(runtime.requests) == 0


async def test_invalid_params_are_minus_32602_and_nothing_is_stored() -> None:
    runtime = Runtime(flush_interval=0)
    response, session = await answer_initialize(
        runtime, MCPServer("serving"), initialize({"protocolVersion": "2025-11-25"}, 3), user=None
    )
    assert session is None
    assert response["id"] == 3
    assert response["error"]["code"] == -32602
    assert response["error"]["message"].startswith("Invalid params for initialize")
    assert not await Session.objects.aexists()
    assert not await LedgerEntry.objects.aexists()


async def test_of_several_invalid_params_the_first_is_named() -> None:
    runtime = Runtime(flush_interval=0)
    params = {"protocolVersion": "2025-11-25", "capabilities": 5, "clientInfo": "not an object"}
    response, session = await answer_initialize(
        runtime, MCPServer("serving"), initialize(params, 5), user=None
    )
    assert session is None
    message = response["error"]["message"]
    assert message.startswith("Invalid params for initialize: ")
    assert "ClientCapabilities" in message  # the capabilities come first, clientInfo (Implementation) after
    assert "Implementation" not in message


async def test_stateless_initialize_stores_no_session_but_records_the_request() -> None:
    runtime = Runtime(flush_interval=0)
    response, session = await answer_initialize(
        runtime, MCPServer("serving"), initialize(PARAMS, 4), user=None, stateless=True
    )
    assert session is None
    assert "result" in response
    assert not await Session.objects.aexists()
    assert [row.state async for row in LedgerEntry.objects.all()] == ["answered"]
