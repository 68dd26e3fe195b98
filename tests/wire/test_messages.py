"""The typed cross-worker messages: each one survives ``to_event`` / ``parse_event``, and the channel layer's
own serialisation (msgpack, as channels-redis sends it); anything else parses to ``None``."""

from __future__ import annotations

from typing import Any, get_args

import msgpack  # type: ignore[import-untyped]
import pytest

from mcp_server.wire.messages import (
    AbortRequest,
    AbortResult,
    CancelRequest,
    CancelSettled,
    ClientAnswer,
    CredentialChanged,
    EndSession,
    ListenEvent,
    SessionChanged,
    StopTask,
    StreamMessage,
    StreamWake,
    TaskStatus,
    WorkerMessage,
    parse_event,
    session_group,
    to_event,
)

SAMPLES: list[WorkerMessage] = [
    CancelRequest(session_id="s1", key="i:1"),
    CancelRequest(session_id=None, key="s:1"),
    CancelSettled(session_id="s1", key="i:1"),
    CancelSettled(session_id=None, key="s:x"),
    EndSession(session_id="s1", reason="session terminated by the client"),
    SessionChanged(session_id="s1"),
    AbortRequest(session_id="s1", key="i:7", reply_to="mcp-worker.abc!def"),
    AbortRequest(session_id=None, key="s:7"),
    AbortResult(session_id="s1", key="i:7", aborted=True),
    AbortResult(session_id=None, key="i:7", aborted=False),
    ClientAnswer(session_id="s1", message={"jsonrpc": "2.0", "id": "srv-1", "result": {"roots": []}}),
    ListenEvent(server="default", method="notifications/tools/list_changed"),
    ListenEvent(server="default", method="notifications/resources/updated", params={"uri": "x://é"}),
    StreamMessage(
        session_id="s1",
        message={"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "x://é"}},
    ),
    StopTask(task_id="Xy-_0123456789abcdefghijklmnopqrstuv"),
    TaskStatus(task_id="t1", task={"taskId": "t1", "status": "working", "ttlMs": None}),
    StreamWake(stream_id="p0123456789abcdef"),
    CredentialChanged(user_id=7, token_id=3),
    CredentialChanged(user_id="7"),
]


def test_every_message_type_has_a_sample() -> None:
    assert {type(m) for m in SAMPLES} == set(get_args(WorkerMessage))


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: f"{m.type}-{getattr(m, 'session_id', m.__dict__)}")
def test_round_trip(message: WorkerMessage) -> None:
    event = to_event(message)
    assert event["type"] == message.type
    assert parse_event(event) == message
    # As a channel layer carries it between processes (channels-redis packs events with msgpack).
    wired = msgpack.unpackb(msgpack.packb(event), raw=False)
    parsed = parse_event(wired)
    assert parsed == message
    assert type(parsed) is type(message)


def test_types_are_distinct() -> None:
    kinds = {type(m) for m in SAMPLES}
    assert len({kind.type for kind in kinds}) == len(kinds)


def _event(kind: type[WorkerMessage], **fields: Any) -> dict[str, Any]:
    return {"type": kind.type, **fields}


@pytest.mark.parametrize(
    "event",
    [
        pytest.param({"type": "mcp.unknown", "session_id": "s1", "key": "i:1"}, id="unknown-type"),
        pytest.param({"session_id": "s1", "key": "i:1"}, id="no-type"),
        pytest.param({"type": None}, id="type-none"),
        pytest.param({"type": 5, "session_id": "s1"}, id="type-not-a-string"),
        pytest.param({"type": "websocket.receive", "text": "{}"}, id="other-protocol"),
        pytest.param(_event(CancelRequest, session_id="s1"), id="missing-field"),
        pytest.param(_event(CancelRequest, session_id="s1", key="i:1", extra=1), id="extra-field"),
        pytest.param(_event(EndSession, session_id="s1", why="x"), id="misnamed-field"),
        pytest.param(_event(AbortResult, session_id="s1", key="i:1"), id="missing-flag"),
        pytest.param(_event(StreamMessage, session_id="s1"), id="missing-payload"),
        pytest.param(_event(SessionChanged), id="no-fields"),
    ],
)
def test_anything_else_is_none(event: dict[str, Any]) -> None:
    assert parse_event(event) is None


def test_session_groups_are_per_session_and_valid_group_names() -> None:
    from channels.layers import BaseChannelLayer

    names = {session_group(s) for s in ("a", "b", "x" * 43)}
    assert len(names) == 3
    layer = BaseChannelLayer()
    for name in names:  # a session id is URL-safe base64: its group must be a name the layer accepts
        assert layer.require_valid_group_name(name)
