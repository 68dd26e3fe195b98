"""Property test: random interleavings of calls, outcomes, cancels and session ends against a real server.

For every request id sent, I1 (exactly one reply, or none after a successful cancel; never two) and
I6 (nothing left in flight once the traffic stops) must hold.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.live import LiveServer
from tests.support.raw import messages_of, open_session, rpc

OUTCOMES = {
    "value": ("tools/call", {"name": "echo", "arguments": {"text": "v"}}),
    "none": ("tools/call", {"name": "returns_none", "arguments": {}}),
    "raise": ("tools/call", {"name": "raises", "arguments": {}}),
    "raw_none": ("test/none", {}),
    "slow": ("tools/call", {"name": "slow", "arguments": {"seconds": 30}}),
    "quick": ("tools/call", {"name": "slow", "arguments": {"seconds": 0.05}}),
}


@dataclass
class Step:
    kind: str  # "call", "cancel" or "end"
    outcome: str = "value"
    target: int = 0


steps = st.lists(
    st.one_of(
        st.builds(Step, kind=st.just("call"), outcome=st.sampled_from(sorted(OUTCOMES))),
        st.builds(Step, kind=st.just("cancel"), target=st.integers(min_value=0, max_value=30)),
        st.builds(Step, kind=st.just("end")),
    ),
    min_size=1,
    max_size=25,
)


def check_reply(
    outcome: str, messages: list[dict[str, Any]], request_id: int, *, may_be_closed: bool
) -> None:
    """The one reply a request may get, by what its handler does."""
    [reply] = messages
    assert reply["id"] == request_id
    if "error" in reply and reply["error"]["code"] == -32000:
        assert may_be_closed, reply
        return
    if outcome == "raw_none":
        assert reply["error"]["code"] == -32603
    elif outcome == "raise":
        assert reply["result"]["isError"] is True
    elif outcome == "none":
        assert reply["result"]["content"] == []
    else:
        assert "result" in reply, reply


async def run(server: LiveServer, plan: list[Step]) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        session = await open_session(http, server.url)
        calls: dict[int, tuple[str, asyncio.Task[httpx.Response]]] = {}
        cancelled: set[int] = set()
        ended = False
        for step in plan:
            if step.kind == "call" and not ended:
                request_id = session.next_id()
                method, params = OUTCOMES[step.outcome]
                calls[request_id] = (
                    step.outcome,
                    asyncio.create_task(session.post(rpc(method, params, request_id))),
                )
                if step.outcome == "slow":
                    await session.wait_pending(request_id)
            elif step.kind == "cancel" and calls and not ended:
                request_id = sorted(calls)[step.target % len(calls)]
                await session.cancel(request_id)
                cancelled.add(request_id)
            elif step.kind == "end" and not ended:
                assert (await session.delete()).status_code == 200
                ended = True
        if not ended:  # anything still running is cancelled or closed, so the example ends
            for request_id, (outcome, _task) in calls.items():
                if outcome == "slow" and request_id not in cancelled:
                    await session.cancel(request_id)
                    cancelled.add(request_id)
        for request_id, (outcome, task) in calls.items():
            response = await asyncio.wait_for(task, 15)
            if ended and response.status_code == 404:
                continue  # reached the server after the session ended: never accepted, so no id to answer
            messages = [m for m in messages_of(response) if m.get("id") == request_id]
            if request_id in cancelled and not messages:
                assert response.status_code in (200, 202)
                continue
            check_reply(outcome, messages, request_id, may_be_closed=ended)
        probe = await open_session(http, server.url)
        stats = await probe.stats()
        assert stats["inflight"] == 0, stats
        assert stats["outbound"] == 0, stats
        await probe.delete()


@pytest.fixture(scope="module", params=["json", "sse"])
def server(request: pytest.FixtureRequest, start: Callable[..., LiveServer]) -> LiveServer:
    return start({"RESPONSE_MODE": request.param})


@settings(max_examples=75, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=steps)
def test_each_id_gets_one_reply_and_nothing_is_left(server: LiveServer, plan: list[Step]) -> None:
    asyncio.run(run(server, plan))
