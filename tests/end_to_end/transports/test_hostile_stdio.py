"""I10 over stdio: every line that carries a request is answered (an error when it cannot be served), the
loop goes on, stdout stays UTF-8 JSON lines, and the ledger records what was sent (both ledger backends)."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from mcp_server.wire.jsonrpc import MAX_INT_ID
from tests.support.live import migrated_template
from tests.support.raw import rpc
from tests.support.stdio import LEDGERS, RawStdio, spawn, stdio_env

SURROGATE = "\ud800"


def strict_json(line: bytes) -> Any:
    """What a strict client reads: UTF-8 (an encoded surrogate is not) holding JSON without NaN/Infinity."""

    def refuse(name: str) -> Any:
        raise AssertionError(f"{name} is not JSON")

    return json.loads(line.decode("utf-8"), parse_constant=refuse)


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def call(request_id: Any, tool: str, **arguments: Any) -> dict[str, Any]:
    return rpc("tools/call", {"name": tool, "arguments": arguments}, request_id)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return migrated_template(tmp_path_factory.mktemp("hostile-stdio"))


@pytest.fixture
async def stdio(template: Path, tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[RawStdio]:
    """``mcp_stdio`` on raw pipes with the ledger backend the test is parametrized with."""
    database = tmp_path / "db.sqlite3"
    shutil.copy(template, database)
    raw = await spawn(stdio_env(database, {"LEDGER_BACKEND": LEDGERS[request.param]}))
    try:
        yield raw
    finally:
        await raw.stop()


@pytest.fixture
def deep_reader() -> Iterator[None]:
    """This client reads back an echo nested 950 deep: more than Python's default recursion limit allows at
    the depth of a test."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(5_000)
    yield
    sys.setrecursionlimit(limit)


# Each line, and the answer it must get: (id, error code), or (id, None) for "one answer with that id, any".
HOSTILE_LINES: list[tuple[str, bytes, Any, int | None]] = [
    ("deep-nesting", b"[" * 100_000 + b"]" * 100_000 + b"\n", None, -32700),
    ("nan", b'{"jsonrpc": "2.0", "id": 1, "method": "test/echo", "params": {"n": NaN}}\n', None, -32700),
    (
        "encoded-surrogate",
        b'{"jsonrpc": "2.0", "id": 2, "method": "test/echo", "params": {"t": "\xed\xa0\x80"}}\n',
        None,
        -32700,
    ),
    ("surrogate-id", line(rpc("ping", None, SURROGATE)), None, -32600),
    ("float-id", line(rpc("ping", None, 1.5)), None, -32600),
    ("bool-id", line(rpc("ping", None, True)), None, -32600),
    ("object-id", line(rpc("ping", None, {"a": 1})), None, -32600),
    ("array-id", line(rpc("ping", None, [1])), None, -32600),
    ("nul-id", line(rpc("ping", None, "a\x00b")), "a\x00b", -32600),
    ("long-id", line(rpc("ping", None, "x" * 300)), "x" * 300, None),  # any string: keyed by its hash
    ("long-method", line(rpc("m" * 300, {}, 28)), 28, -32601),  # unknown, however long
    ("huge-id", line(rpc("ping", None, MAX_INT_ID + 1)), MAX_INT_ID + 1, -32600),
    ("surrogate-method", line(rpc("tools/" + SURROGATE, {}, 20)), 20, -32600),
    ("surrogate-result", line(rpc("test/echo", {"text": SURROGATE}, 21)), 21, -32603),  # raw: as sent
    (
        "surrogate-prompt-argument",  # a handler's str is text: refused before the prompt runs
        line(
            rpc(
                "prompts/get",
                {"name": "test_prompt_with_arguments", "arguments": {"arg1": SURROGATE, "arg2": "b"}},
                22,
            )
        ),
        22,
        -32602,
    ),
    (
        "infinite-result",
        b'{"jsonrpc": "2.0", "id": 23, "method": "test/echo", "params": {"n": 1e400}}\n',
        23,
        -32603,
    ),
    ("nul-tool-name", line(call(24, "no\x00such")), 24, -32602),
    ("surrogate-tool-name", line(call(25, SURROGATE)), 25, -32602),
    (  # within MAX_DEPTH: an answer with its id
        "deep-params-200",
        b'{"jsonrpc": "2.0", "id": 26, "method": "test/echo", "params": {"d": '
        + b"[" * 200
        + b"]" * 200
        + b"}}\n",
        26,
        None,
    ),
    (  # past MAX_DEPTH: refused as a whole, like any body too deep to parse
        "deep-params-950",
        b'{"jsonrpc": "2.0", "id": 27, "method": "test/echo", "params": {"d": '
        + b"[" * 950
        + b"]" * 950
        + b"}}\n",
        None,
        -32700,
    ),
]


@pytest.mark.parametrize("stdio", sorted(LEDGERS), indirect=True)
async def test_every_hostile_line_is_answered_and_the_loop_goes_on(
    stdio: RawStdio, deep_reader: None
) -> None:
    await stdio.initialize()
    for name, data, request_id, code in HOSTILE_LINES:
        await stdio.send(data)
        answer = await stdio.receive()
        if code == -32700 and request_id is None and answer.get("id") is None:
            assert answer["error"]["code"] == -32700, (name, answer)
            continue
        assert answer.get("id") == request_id, (name, answer)
        assert "method" not in answer
        if code is not None:
            assert answer["error"]["code"] == code, (name, answer)
    assert await stdio.request(rpc("ping", None, 99)) == {"jsonrpc": "2.0", "id": 99, "result": {}}

    stored = {
        r["request_key"]: r
        for r in (await stdio.request(rpc("test/ledger_records", {}, "probe")))["result"]["records"]
    }
    assert stored["i:21"]["outcome"]["error"]["code"] == -32603  # what was sent
    assert stored["i:24"]["name"] == "no\ufffdsuch"
    assert stored["i:25"]["name"] == "\ufffd"
    assert [key for key, r in stored.items() if r["state"] == "pending" and key != "s:probe"] == []
    assert not {"s:a\x00b", f"i:{MAX_INT_ID + 1}", "i:20"} & set(stored)  # refused: never recorded

    assert await stdio.finish() == 0
    for sent in stdio.lines:  # one strict UTF-8 JSON message per line
        assert isinstance(strict_json(sent), dict)
    assert len(stdio.lines) == 1 + len(HOSTILE_LINES) + 2  # initialize, one answer per line, ping, probe
