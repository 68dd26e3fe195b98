"""Several worker processes on one site: the ledgers, raw sessions, a request's ledger key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from tests.support.live import (
    LiveServer,
)
from tests.support.raw import messages_of, rpc

__all__ = [
    "BATCH_VERSION",
    "CACHE_LEDGER",
    "DB_LEDGER",
    "McpSession",
    "open_session",
    "request_key",
]

ACCEPT_BOTH = "application/json, text/event-stream"


LATEST = "2025-11-25"


BATCH_VERSION = "2025-03-26"


DB_LEDGER = "mcp_server.stores.ledger.database.DatabaseLedger"


CACHE_LEDGER = "mcp_server.stores.ledger.cache.CacheLedger"


@dataclass
class McpSession:
    """One client session, usable on any worker of the site."""

    http: httpx.AsyncClient
    id: str
    version: str

    def headers(self, accept: str = ACCEPT_BOTH) -> dict[str, str]:
        return {
            "Accept": accept,
            "Content-Type": "application/json",
            "Mcp-Session-Id": self.id,
            "MCP-Protocol-Version": self.version,
        }

    async def post(self, server: LiveServer, body: Any) -> httpx.Response:
        return await self.http.post(server.url, headers=self.headers(), json=body)

    def stream(self, server: LiveServer, body: Any) -> Any:
        """A POST whose response is read as it arrives (``async with``)."""
        return self.http.stream("POST", server.url, headers=self.headers(), json=body)

    async def call(self, server: LiveServer, request_id: int | str, method: str, params: Any) -> Any:
        """A request that must be answered with a result; returns the result."""
        response = await self.post(server, rpc(method, params, request_id))
        answers = [m for m in messages_of(response) if m.get("id") == request_id and "method" not in m]
        assert len(answers) == 1, response.text
        assert "result" in answers[0], answers[0]
        return answers[0]["result"]

    async def cancel(self, server: LiveServer, request_id: int | str) -> None:
        params = {"requestId": request_id, "reason": "changed my mind"}
        response = await self.post(
            server, {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}
        )
        assert response.status_code == 202, response.text

    async def delete(self, server: LiveServer) -> None:
        response = await self.http.delete(server.url, headers=self.headers())
        assert response.status_code == 200, response.text

    async def ledger_pending(self, server: LiveServer, of: str | None = None) -> list[int | str]:
        """Pending requests of this session (or session ``of``) as the ledger records them."""
        params = {"session": of} if of is not None else {}
        result = await self.call(server, "ledger-probe", "test/ledger_pending", params)
        return list(result["pending"])


async def open_session(
    http: httpx.AsyncClient,
    server: LiveServer,
    *,
    version: str = LATEST,
    capabilities: dict[str, Any] | None = None,
) -> McpSession:
    params = {
        "protocolVersion": version,
        "capabilities": capabilities or {},
        "clientInfo": {"name": "multiprocess-tests", "version": "1"},
    }
    headers = {"Accept": ACCEPT_BOTH, "Content-Type": "application/json"}
    response = await http.post(server.url, headers=headers, json=rpc("initialize", params, 0))
    assert response.status_code == 200, response.text
    assert messages_of(response)[0]["result"]["protocolVersion"] == version
    session = McpSession(http, response.headers["mcp-session-id"], version)
    initialized = await session.post(server, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert initialized.status_code == 202
    return session


def request_key(request_id: int | str) -> str:
    return f"i:{request_id}" if isinstance(request_id, int) else f"s:{request_id}"
