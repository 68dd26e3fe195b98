"""Resumable handshake-era streams on a live server, in raw HTTP: event ids, the priming event and its
``retry`` hint, ``Last-Event-ID`` replay of a POST stream cut mid-call (or closed for polling) and of a GET
stream, each response delivered exactly once."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

import httpx
import pytest

from tests.support.live import LiveServer
from tests.support.raw import RawSession, open_session
from tests.support.resumable import Event, call, check_rest, events_of

pytestmark = pytest.mark.asyncio

QUIET = 4.0
"""Seconds a handler stays quiet under a resumed stream (more than the 2 s grace for an unknown stream)."""


async def open_gate(session: RawSession, gate: str) -> None:
    assert (await session.request("test/open_step_gate", {"gate": gate}))["result"] == {"opened": gate}


async def resume(session: RawSession, last_event_id: str) -> list[Event]:
    """GET with ``Last-Event-ID``: every event until the server ends the stream."""
    headers = session.headers(accept="text/event-stream", **{"Last-Event-ID": last_event_id})
    async with session.http.stream("GET", session.url, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        return [event async for event in events_of(response)]


@pytest.fixture(scope="module")
def server(start: Callable[..., LiveServer]) -> LiveServer:
    return start({"RESPONSE_MODE": "sse"})


async def test_cut_mid_call_then_resume_gets_the_rest_once(server: LiveServer) -> None:
    gate = uuid.uuid4().hex
    async with httpx.AsyncClient(timeout=30) as http:
        session = await open_session(http, server.url)
        async with http.stream("POST", server.url, json=call(gate, 7), headers=session.headers()) as response:
            stream = events_of(response)
            priming = await anext(stream)
            first = await anext(stream)
        # the connection is cut here, the call waits at its gate
        assert priming.data == ""
        assert priming.retry == 1000
        assert priming.id is not None
        stream_id, _sep, seq = priming.id.rpartition(":")
        assert stream_id.startswith("p")
        assert seq == "0"
        assert first.message["params"]["progress"] == 1
        assert first.id == f"{stream_id}:1"
        await open_gate(session, gate)
        other = uuid.uuid4().hex  # another stream of the same session, in the store too: never replayed here
        await open_gate(session, other)
        assert (await session.post(call(other, 70))).status_code == 200
        check_rest(await resume(session, first.id), stream_id, 1, 7)
        again = await resume(session, first.id)  # replayed from the store as often as asked, same ids
        check_rest(again, stream_id, 1, 7)
        assert not await resume(session, again[-1].id)  # nothing after the response: the stream just ends


async def test_closed_by_the_handler_for_polling(server: LiveServer) -> None:
    """``ctx.close_stream()``: the POST stream ends at once (after the priming event and progress 1); the
    request runs on and its result waits for the client's GET with ``Last-Event-ID``."""
    gate = uuid.uuid4().hex
    async with httpx.AsyncClient(timeout=30) as http:
        session = await open_session(http, server.url)
        async with http.stream(
            "POST", server.url, json=call(gate, 8, close_stream=True), headers=session.headers()
        ) as response:
            events = [event async for event in events_of(response)]
        assert [e.data == "" for e in events] == [True, False]
        assert events[1].message["params"]["progress"] == 1
        await open_gate(session, gate)
        stream_id = str(events[0].id).rpartition(":")[0]
        check_rest(await resume(session, str(events[1].id)), stream_id, 1, 8)
        pending = (await session.stats())["pending"]
        assert 8 not in pending


async def test_poll_after_closes_long_streams(start: Callable[..., LiveServer]) -> None:
    """``SSE_POLL_AFTER``: a stream still open after that long is ended by the server; the request keeps
    running, and the resumed stream delivers what remains (I1: exactly one response)."""
    polling = start({"RESPONSE_MODE": "sse", "SSE_POLL_AFTER": 0.3, "SSE_RETRY_MS": 50})
    gate = uuid.uuid4().hex
    async with httpx.AsyncClient(timeout=30) as http:
        session = await open_session(http, polling.url)
        async with http.stream(
            "POST", polling.url, json=call(gate, 9), headers=session.headers()
        ) as response:
            events = [event async for event in events_of(response)]  # ends by itself, the gate still shut
        assert events[0].retry == 50
        assert events[0].data == ""
        assert [e.message["params"]["progress"] for e in events[1:]] == [1]
        await open_gate(session, gate)
        stream_id = str(events[0].id).rpartition(":")[0]
        check_rest(await resume(session, str(events[-1].id)), stream_id, 1, 9)


async def test_older_revisions_get_ids_but_no_priming(server: LiveServer) -> None:
    gate = uuid.uuid4().hex
    async with httpx.AsyncClient(timeout=30) as http:
        session = await open_session(http, server.url, version="2025-06-18")
        await open_gate(session, gate)
        response = await session.post(call(gate, 10))
        events = [e async for e in events_of(response)]
        assert all(e.data for e in events)
        assert all(e.retry is None for e in events)
        assert [str(e.id).rpartition(":")[2] for e in events] == ["1", "2", "3", "4"]


async def test_get_stream_resumes_its_own_events(server: LiveServer) -> None:
    """A GET stream's events carry ids too; ``Last-Event-ID`` of one replays the later ones of that stream
    only, then the stream goes on live, numbered on."""
    async with httpx.AsyncClient(timeout=30) as http:
        session = await open_session(http, server.url)
        headers = session.headers(accept="text/event-stream")
        async with http.stream("GET", server.url, headers=headers) as response:
            stream = events_of(response)
            priming = await anext(stream)
            for feature in ("tools", "prompts"):
                await session.request("test/notify", {"feature": feature})
            first, second = await anext(stream), await anext(stream)
        assert priming.data == ""
        assert str(priming.id).startswith("g")
        assert [first.message["method"], second.message["method"]] == [
            "notifications/tools/list_changed",
            "notifications/prompts/list_changed",
        ]
        resumed_headers = {**headers, "Last-Event-ID": str(first.id)}
        async with http.stream("GET", server.url, headers=resumed_headers) as response:
            stream = events_of(response)
            replayed = await anext(stream)
            assert replayed.id == second.id
            assert replayed.message == second.message
            await session.request("test/notify", {"feature": "resources"})
            live = await anext(stream)
        stream_id, _sep, seq = str(second.id).rpartition(":")
        assert live.id == f"{stream_id}:{int(seq) + 1}"
        assert live.message["method"] == "notifications/resources/list_changed"


async def test_a_foreign_last_event_id_is_refused(server: LiveServer) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        session = await open_session(http, server.url)
        headers = session.headers(accept="text/event-stream", **{"Last-Event-ID": "not-an-id"})
        response = await http.get(server.url, headers=headers)
        assert response.status_code == 400


@pytest.mark.parametrize(
    "stream_part",
    ["p!", "p/x", "p@x", "p%41", "p a", "p\xe9", "p" + "a" * 60, "g!", "g/x", "g\xe9", "P" + "0" * 32],
)
async def test_a_last_event_id_with_any_character_in_its_stream_part_is_a_400(
    server: LiveServer, stream_part: str
) -> None:
    """Such a stream part once reached a Channels group name, which refused it: a 500 and a traceback."""
    async with httpx.AsyncClient(timeout=30) as http:
        session = await open_session(http, server.url)
        headers = session.headers(accept="text/event-stream")
        raw = [(k.encode(), v.encode()) for k, v in headers.items()]
        raw.append((b"last-event-id", f"{stream_part}:1".encode("latin-1")))
        response = await http.get(server.url, headers=raw)
        assert response.status_code == 400, response.text
        assert response.json()["error"]["message"].startswith("Bad Request: Last-Event-ID")


async def test_a_well_formed_id_of_no_stream_of_the_session_is_a_400(server: LiveServer) -> None:
    """The docs: an id the server did not issue (or whose stream was pruned) is a 400, after the grace in
    which another worker's batch could still bring its rows. An empty 200 would make the official client
    reconnect for ever (each empty stream resets its attempt count); a 400 makes it give up."""
    async with httpx.AsyncClient(timeout=30) as http:
        session = await open_session(http, server.url)
        for kind in ("p", "g"):  # a GET stream's id is resumed live, known or not: only POST streams end
            headers = session.headers(accept="text/event-stream", **{"Last-Event-ID": f"{kind}{'0' * 32}:3"})
            if kind == "p":
                response = await http.get(server.url, headers=headers)
                assert response.status_code == 400, response.text
                continue
            async with http.stream("GET", server.url, headers=headers) as response:
                assert response.status_code == 200
        # a POST stream of another session is no stream of this one
        gate = uuid.uuid4().hex
        await open_gate(session, gate)
        events = [e async for e in events_of(await session.post(call(gate, 11)))]
        other = await open_session(http, server.url)
        headers = other.headers(accept="text/event-stream", **{"Last-Event-ID": str(events[0].id)})
        assert (await http.get(server.url, headers=headers)).status_code == 400
        assert len(await resume(session, str(events[0].id))) == 4  # its own session replays it


async def test_a_resumed_stream_outlasts_a_quiet_handler(server: LiveServer) -> None:
    """The client resumes while the handler says nothing for several seconds (longer than the grace for
    an unknown stream and many store polls): the resumed stream stays open, then delivers every later event
    and the response, exactly once."""
    gate = uuid.uuid4().hex
    async with httpx.AsyncClient(timeout=60) as http:
        session = await open_session(http, server.url)
        async with http.stream(
            "POST", server.url, json=call(gate, 12), headers=session.headers()
        ) as response:
            stream = events_of(response)
            priming = await anext(stream)
            first = await anext(stream)
        stream_id = str(priming.id).rpartition(":")[0]
        headers = session.headers(accept="text/event-stream", **{"Last-Event-ID": str(first.id)})
        async with http.stream("GET", server.url, headers=headers) as resumed:
            assert resumed.status_code == 200
            events = events_of(resumed)
            waiting = asyncio.ensure_future(anext(events))
            done, _ = await asyncio.wait([waiting], timeout=QUIET)  # the handler waits at its gate
            assert not done, waiting.result()  # nothing comes, and the stream does not end
            await open_gate(session, gate)
            rest = [await waiting, *[event async for event in events]]
        check_rest(rest, stream_id, 1, 12)
        assert 12 not in (await session.stats())["pending"]


async def test_the_official_client_resumes_a_closed_stream(start: Callable[..., LiveServer]) -> None:
    """The official client (``mcp``): the tool closes its stream after progress 1; the client reconnects
    with ``Last-Event-ID`` after the ``retry`` hint and gets progress 2 and 3 and the result, once each."""
    from mcp import Client

    server = start({"RESPONSE_MODE": "sse", "SSE_RETRY_MS": 20})
    gate = uuid.uuid4().hex
    progress: list[float] = []
    opened: list[str] = []

    async with httpx.AsyncClient(timeout=30) as http:
        opener = await open_session(http, server.url)

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append(value)
            if value == 1:  # the stream is closed by now, or about to be: let the call go on
                await open_gate(opener, gate)
                opened.append(gate)

        async with Client(server.url, mode="legacy") as client:
            result = await client.call_tool(
                "gated_steps", {"gate": gate, "close_stream": True}, progress_callback=on_progress
            )
    assert opened == [gate]
    assert progress == [1, 2, 3]
    assert not result.is_error
    assert result.content[0].text == f"passed gate {gate}"
