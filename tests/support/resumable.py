"""Resumable streams: the gated tool's call, its SSE events read with their ids, the rest of a stream
checked."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx

from tests.support.raw import rpc

__all__ = ["Event", "call", "check_rest", "events_of"]


@dataclass
class Event:
    id: str | None
    data: str
    retry: int | None

    @property
    def message(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.data)
        return value


async def events_of(response: httpx.Response) -> AsyncIterator[Event]:
    """The SSE events of a response as they arrive (comments skipped; the priming event has empty data)."""
    fields: dict[str, list[str]] = {}
    async for line in response.aiter_lines():
        if line.startswith(":"):
            continue
        if line:
            name, _sep, value = line.partition(":")
            fields.setdefault(name, []).append(value.removeprefix(" "))
            continue
        if "id" in fields or "data" in fields:
            retry = fields.get("retry")
            yield Event(
                fields["id"][-1] if "id" in fields else None,
                "\n".join(fields.get("data", [])),
                int(retry[-1]) if retry else None,
            )
        fields = {}


def call(gate: str, request_id: int, **arguments: Any) -> dict[str, Any]:
    params = {
        "name": "gated_steps",
        "arguments": {"gate": gate, **arguments},
        "_meta": {"progressToken": "t"},
    }
    return rpc("tools/call", params, request_id)


def check_rest(events: list[Event], stream: str, after: int, request_id: int) -> None:
    """The events after the cut: progress 2 and 3, then the result, once each, numbered on."""
    messages = [e.message for e in events]
    progress = [m["params"]["progress"] for m in messages if m.get("method") == "notifications/progress"]
    answers = [m for m in messages if m.get("id") == request_id]
    assert progress == [2, 3], messages
    assert len(answers) == 1, messages
    assert answers[0]["result"]["content"][0]["text"].startswith("passed gate"), messages
    assert messages[-1] is answers[0]
    seqs = [int(str(e.id).rpartition(":")[2]) for e in events]
    assert all(str(e.id).startswith(stream + ":") for e in events), events
    assert seqs == sorted(set(seqs)), seqs
    assert seqs[0] > after, seqs
