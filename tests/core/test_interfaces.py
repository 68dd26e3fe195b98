"""The core's narrow views (``core.interfaces``) of the server and the process, and the typed way back to the
objects behind them: what a handler's context holds is the registry's server and the worker's runtime."""

from __future__ import annotations

import pytest

from mcp_server.core.context import Context, SessionState
from mcp_server.core.interfaces import ProcessView, ServerView
from mcp_server.protocol.interfaces import AnswerHost, RequestHost
from mcp_server.protocol.listen import listeners_of
from mcp_server.protocol.tasks import runner_of
from mcp_server.registry.server import MCPServer, server_of
from mcp_server.runtime import Runtime
from mcp_server.stores.ledger.database import DatabaseLedger


def context(server: ServerView, runtime: ProcessView | None = None) -> Context:
    return Context(
        server=server,
        session=SessionState(id=None, protocol_version="2025-11-25"),
        request_id=1,
        method="tools/call",
        params={},
        peer=object(),  # never used here
        runtime=runtime,
    )


class OtherServer:
    """Something with a key that is not a registry's server."""

    key = "other"


def test_server_of_gives_back_the_registry_server_and_refuses_anything_else() -> None:
    server = MCPServer("views")
    assert server_of(context(server)) is server
    with pytest.raises(TypeError, match="is not an MCPServer"):
        server_of(context(OtherServer()))


def test_the_runtime_is_each_narrow_view_and_its_tables_come_back_typed() -> None:
    runtime = Runtime(worker_id="views", ledger=DatabaseLedger({}), channel_layer_alias="no such layer")
    views: tuple[ProcessView, RequestHost, AnswerHost] = (runtime, runtime, runtime)  # checked by mypy
    assert all(view is runtime for view in views)
    ctx = context(MCPServer("views"), runtime)
    assert ctx.runtime is runtime
    assert listeners_of(ctx) is runtime.listeners
    assert runner_of(ctx) is runtime.tasks
    bare = context(MCPServer("views"))
    assert listeners_of(bare) is None
    assert runner_of(bare) is None
