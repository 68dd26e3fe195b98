"""Listening on a live server at 2026-07-28: a ``subscriptions/listen`` stream read as it arrives, and a
change told to it."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from tests.support.live import LiveServer
from tests.support.raw import messages_of, rpc, sessionless_headers, sessionless_meta

__all__ = ["SUBSCRIPTION", "Stream", "listening", "notify"]

SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"


TIMEOUT = 10.0


meta = sessionless_meta


headers = sessionless_headers


class Stream:
    """One open listen response: its messages as they arrive, and the comment lines it carried."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.comments: list[str] = []
        self._lines = response.aiter_lines()

    async def next(self) -> dict[str, Any]:
        """The next message (comments on the way are kept in ``comments``)."""
        data: list[str] = []
        async with asyncio.timeout(TIMEOUT):
            async for line in self._lines:
                if line.startswith(":"):
                    self.comments.append(line)
                elif line.startswith("data:"):
                    data.append(line[5:].lstrip(" "))
                elif not line and data:
                    message = json.loads("\n".join(data))
                    assert isinstance(message, dict)
                    return message
        raise AssertionError("the stream ended")

    async def rest(self, within: float = TIMEOUT) -> list[dict[str, Any]]:
        """Every message until the server ends the stream (fails if it is still open after ``within``)."""
        messages: list[dict[str, Any]] = []
        data: list[str] = []
        async with asyncio.timeout(within):
            async for line in self._lines:
                if line.startswith("data:"):
                    data.append(line[5:].lstrip(" "))
                elif not line and data:
                    messages.append(json.loads("\n".join(data)))
                    data = []
        return messages

    async def comment(self) -> str:
        """Wait for the next comment line (a keep-alive)."""
        seen = len(self.comments)
        async with asyncio.timeout(TIMEOUT):
            async for line in self._lines:
                if line.startswith(":"):
                    self.comments.append(line)
                    return line
                assert not line.startswith("data:"), f"a message on a quiet stream: {line}"
        raise AssertionError(f"the stream ended after {self.comments[seen:]}")


@contextlib.asynccontextmanager
async def listening(
    server: LiveServer,
    notifications: dict[str, Any],
    request_id: int | str = 1,
    capabilities: dict[str, Any] | None = None,
    **extra: str,
) -> AsyncIterator[Stream]:
    """An open listen stream (``extra``: more headers, e.g. ``Authorization``)."""
    payload = rpc(
        "subscriptions/listen", {"notifications": notifications, "_meta": meta(capabilities)}, request_id
    )
    sent = headers("subscriptions/listen", **extra)
    async with (
        httpx.AsyncClient(timeout=httpx.Timeout(TIMEOUT, read=None)) as client,
        client.stream("POST", server.url, content=json.dumps(payload).encode(), headers=sent) as response,
    ):
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        yield Stream(response)


async def call(server: LiveServer, method: str, params: dict[str, Any], request_id: int | str = 90) -> Any:
    """Another request, on a connection of its own (its answer is read whole)."""
    async with httpx.AsyncClient(timeout=TIMEOUT) as client:
        response = await client.post(
            server.url, json=rpc(method, {**params, "_meta": meta()}, request_id), headers=headers(method)
        )
    return messages_of(response)[-1]


async def notify(server: LiveServer, **what: str) -> None:
    """Publish a change as application code does (``anotify_list_changed`` / ``anotify_resource_updated``)."""
    answer = await call(server, "test/notify", what)
    assert "result" in answer, answer
