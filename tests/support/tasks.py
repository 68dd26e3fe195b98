"""A raw-HTTP client of the tasks extension (2026-07-28) for the tests: every request with its ``_meta`` and
the routing headers (``Mcp-Name: <taskId>`` on ``tasks/*``), answers read in JSON or SSE alike."""

from __future__ import annotations

import itertools
from typing import Any

import httpx

from tests.support.raw import messages_of, rpc, sessionless_headers, sessionless_meta
from tests.support.wait import wait_for

TASKS = "io.modelcontextprotocol/tasks"
WITH_TASKS: dict[str, Any] = {"extensions": {TASKS: {}}, "elicitation": {}}
"""Client capabilities declaring the tasks extension (and form elicitation)."""
LIVE = ("working", "input_required")

_ids = itertools.count(1)


class TaskClient:
    """Sends 2026-07-28 requests to ``url`` with ``capabilities`` (and ``headers``, e.g. a bearer token),
    from ``local_address`` if given."""

    def __init__(
        self,
        url: str,
        capabilities: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        local_address: str | None = None,
    ) -> None:
        self.url = url
        self.local_address = local_address
        """The loopback address requests come from (``127.0.0.2``...: another anonymous caller)."""
        self.capabilities = WITH_TASKS if capabilities is None else capabilities
        self.extra = dict(headers or {})

    def headers(self, method: str, name: str | None) -> dict[str, str]:
        return sessionless_headers(method, name, **self.extra)

    async def post(
        self, method: str, params: dict[str, Any], *, name: str | None = None, **head: str
    ) -> tuple[httpx.Response, dict[str, Any]]:
        """The HTTP response and its final JSON-RPC message."""
        meta = sessionless_meta(self.capabilities, {"name": "tasks-tests", "version": "1"})
        request_id = next(_ids)
        if name is None and method == "tools/call":
            name = str(params["name"])
        if name is None and method.startswith("tasks/"):
            name = str(params.get("taskId"))
        transport = httpx.AsyncHTTPTransport(local_address=self.local_address) if self.local_address else None
        async with httpx.AsyncClient(timeout=15, transport=transport) as http:
            response = await http.post(
                self.url,
                json=rpc(method, {**params, "_meta": meta}, request_id),
                headers={**self.headers(method, name), **head},
            )
        message = messages_of(response)[-1]
        assert message.get("id") == request_id, message
        return response, message

    async def result(self, method: str, params: dict[str, Any], **options: Any) -> dict[str, Any]:
        """The result of a request that must succeed."""
        response, message = await self.post(method, params, **options)
        assert "result" in message, (response.status_code, message)
        return dict(message["result"])

    async def error(
        self, method: str, params: dict[str, Any], status: int, code: int, **options: Any
    ) -> dict[str, Any]:
        """The error of a request that must fail with this HTTP status and JSON-RPC code."""
        response, message = await self.post(method, params, **options)
        assert response.status_code == status, (response.status_code, message)
        assert message.get("error", {}).get("code") == code, message
        return dict(message["error"])

    async def create(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """Call a task-capable tool; the ``CreateTaskResult``."""
        created = await self.result("tools/call", {"name": tool, "arguments": arguments or {}})
        assert created["resultType"] == "task", created
        return created

    async def get(self, task_id: str) -> dict[str, Any]:
        return await self.result("tasks/get", {"taskId": task_id})

    async def wait(self, task_id: str, *statuses: str, within: float = 10.0) -> dict[str, Any]:
        """Poll ``tasks/get`` until the task is in one of ``statuses``; fail after ``within`` seconds."""

        async def in_status() -> dict[str, Any] | None:
            task = await self.get(task_id)
            return task if task["status"] in statuses else None

        return await wait_for(in_status, f"task {task_id} in {statuses}", within=within, every=0.05)
