"""A hostile soak: a live server under a long mix of normal calls, cancels, DELETEs mid-flight, batches mixing
good and bad members and hostile bodies, with the counts that tell whether every request id got one answer.

    .venv/bin/python bench/soak.py --seconds 60 --concurrency 16       # its own server (SQLite, in memory)
    .venv/bin/python bench/soak.py --postgres --redis --seconds 300    # its own server on the local services
    .venv/bin/python bench/soak.py --url http://127.0.0.1:8000/mcp --pid 1234

Each of ``--concurrency`` clients holds two keep-alive connections (raw sockets, as ``bench/loadgen.py``) and
two sessions (the latest revision, and 2025-03-26 for batches), and draws actions at random until
``--seconds`` have passed: a call; a slow call cancelled from the second connection; a slow call whose
session is ended (DELETE) from it; a batch of good and bad members; one hostile body (wrong-typed ids, deep
nesting, lone surrogates, NUL, huge integers, oversize fields, garbage bytes). Prints: HTTP requests by
action, responses by status class, 5xx by action, the request ids that had to be answered and how each ended
(answered, closed -32000, cancelled, refused with its whole body, unanswered, answered twice), exchanges that
hung, what the server holds at the end (in flight, and pending in the ledger: the test site's ``test/stats``)
and its RSS before and after. A script that prints figures, not a test (``--json`` for one JSON object).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench import rss_kib  # noqa: E402
from bench.loadgen import Connection, replies_in  # noqa: E402

LATEST, BATCHES = "2025-11-25", "2025-03-26"
EXCHANGE_TIMEOUT = 30.0
"""An exchange that takes longer has hung (the slow tool sleeps 5 s; cancels and DELETEs end it sooner)."""
ACTIONS = {"call": 40, "cancel": 10, "delete": 5, "batch": 10, "hostile": 35}
RequestId = str | int


def dumps(message: Any) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode()


def call(request_id: RequestId, tool: str = "echo", arguments: Any = None) -> dict[str, Any]:
    params = {"name": tool, "arguments": {"text": "x"} if arguments is None else arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def hostile_bodies(n: int) -> list[tuple[str, bytes, list[RequestId]]]:
    """``(name, body, ids that must each get one answer if the body is taken)`` for request number ``n``."""
    deep = 100_000
    surrogate_id = f"\udc00-{n}"
    huge = 10**400
    return [
        ("float id", dumps({**call(0), "id": 1.5}), []),
        ("bool id", dumps({**call(0), "id": True}), []),
        ("object id", dumps({**call(0), "id": {"a": 1}}), []),
        (
            "deep nesting",
            b'{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"a":' % n
            + b"[" * deep
            + b"]" * deep
            + b"}}",
            [n],
        ),
        ("surrogate in argument", dumps(call(n, arguments={"text": "\ud800"})), [n]),
        ("surrogate in id", dumps(call(surrogate_id)), [surrogate_id]),
        ("surrogate in method", dumps({**call(n), "method": "tools/\ud800"}), [n]),
        ("NUL in argument", dumps(call(n, arguments={"text": "a\u0000b"})), [n]),
        ("NUL byte", b'{"jsonrpc":"2.0","id":%d,"method":"ping\x00"}' % n, [n]),
        ("huge int id", dumps(call(huge + n)), [huge + n]),
        ("huge int argument", dumps(call(n, arguments={"text": huge})), [n]),
        ("oversize method", dumps({**call(n), "method": "m" * 100_000}), [n]),
        ("oversize id", dumps(call(f"{n}-" + "i" * 100_000)), [f"{n}-" + "i" * 100_000]),
        ("oversize tool name", dumps(call(n, tool="t" * 100_000)), [n]),
        ("garbage bytes", random.randbytes(300), []),
        ("invalid UTF-8", b'{"jsonrpc":"2.0","id":%d,"method":"ping","\xff\xfe":1}' % n, []),
        ("not an object", b"42", []),
    ]


class Client(Connection):
    """One keep-alive connection; :meth:`send` any method and body, on any of the client's sessions."""

    async def connect(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def send(
        self, method: str, body: bytes = b"", session: str | None = None, version: str = LATEST
    ) -> tuple[int, dict[str, str], bytes]:
        head = [
            f"{method} {self.path} HTTP/1.1",
            f"Host: {self.host}:{self.port}",
            f"Content-Length: {len(body)}",
        ]
        head += ["Content-Type: application/json", "Accept: application/json, text/event-stream"]
        if session is not None:
            head += [f"Mcp-Session-Id: {session}", f"MCP-Protocol-Version: {version}"]
        self.writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        async with asyncio.timeout(EXCHANGE_TIMEOUT):
            status, headers, answer = await self._response()
        if headers.get("connection", "").lower() == "close":  # e.g. a 413: the server closes; so do we
            self.writer.close()
            await self.connect()
        return status, headers, answer

    async def initialize(self, version: str) -> str:
        params = {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "soak", "version": "1"},
        }
        status, headers, body = await self.send(
            "POST", dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
        )
        if status != 200 or "mcp-session-id" not in headers:
            raise RuntimeError(f"initialize answered {status}: {body[:200]!r}")
        session = headers["mcp-session-id"]
        await self.send(
            "POST", dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}), session, version
        )
        return session


class Soak:
    """The counts, and the clients' loop."""

    def __init__(self, url: str, seconds: float) -> None:
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        self.address = (parts.hostname or "127.0.0.1", parts.port or 80, parts.path or "/mcp")
        self.deadline = time.monotonic() + seconds
        self.requests: Counter[str] = Counter()
        self.statuses: Counter[str] = Counter()
        self.server_errors: Counter[str] = Counter()
        self.ids: Counter[str] = Counter()
        self.hung = 0
        self.next_id = 0

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def record(
        self,
        action: str,
        status: int,
        headers: dict[str, str],
        body: bytes,
        ids: list[RequestId],
        *,
        cancelled: bool = False,
    ) -> None:
        """Count one response and how each id it had to answer ended."""
        self.requests[action] += 1
        self.statuses[f"{status // 100}xx"] += 1
        if status >= 500:
            self.server_errors[action] += 1
        if status >= 400:
            self.ids["refused with the body"] += len(ids)
            return
        try:
            replies = replies_in(headers, body)
        except ValueError:
            replies, self.statuses["unparseable body"] = [], self.statuses["unparseable body"] + 1
        for request_id in ids:
            mine = [m for m in replies if m.get("id") == request_id and "method" not in m]
            if len(mine) > 1:
                self.ids["answered twice"] += 1
            elif mine and mine[0].get("error", {}).get("code") == -32000:
                self.ids["closed -32000"] += 1
            elif mine:
                self.ids["answered"] += 1
            else:
                self.ids["cancelled" if cancelled and status == 202 else "unanswered"] += 1

    async def client(self) -> None:
        host, port, path = self.address
        main, side = Client(host, port, path), Client(host, port, path)
        await main.connect()
        await side.connect()
        sessions = {LATEST: await main.initialize(LATEST), BATCHES: await main.initialize(BATCHES)}
        while time.monotonic() < self.deadline:
            action = random.choices(list(ACTIONS), weights=list(ACTIONS.values()))[0]
            try:
                await self.act(action, main, side, sessions)
            except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError):
                self.hung += 1
                for connection in (main, side):  # a hung or broken connection is not reused
                    with contextlib.suppress(Exception):
                        await connection.close()
                    await connection.connect()
                sessions = {LATEST: await main.initialize(LATEST), BATCHES: await main.initialize(BATCHES)}
        await main.close()
        await side.close()

    async def act(self, action: str, main: Client, side: Client, sessions: dict[str, str]) -> None:
        session = sessions[LATEST]
        if action == "call":
            request_id = self.new_id()
            self.record(action, *await main.send("POST", dumps(call(request_id)), session), [request_id])
        elif action in ("cancel", "delete"):
            request_id = self.new_id()
            slow = dumps(call(request_id, "slow", {"seconds": 5}))
            pending = asyncio.ensure_future(main.send("POST", slow, session))
            if action == "cancel":
                note = {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": request_id},
                }
                self.record("cancel notification", *await side.send("POST", dumps(note), session), [])
            else:
                self.record("delete", *await side.send("DELETE", b"", session), [])
                sessions[LATEST] = await side.initialize(LATEST)
            self.record(
                f"slow call, then {action}", *await pending, [request_id], cancelled=action == "cancel"
            )
        elif action == "batch":
            good, unknown, last = self.new_id(), self.new_id(), self.new_id()
            batch = [
                call(good),
                {**call(0), "id": 2.5},
                {"jsonrpc": "2.0", "id": unknown, "method": "no/such/method"},
                {"not": "a message"},
                call(last, arguments={"text": "\u0000"}),
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/progress",
                    "params": {"progressToken": 1, "progress": 1},
                },
            ]
            self.record(
                action,
                *await main.send("POST", dumps(batch), sessions[BATCHES], BATCHES),
                [good, unknown, last],
            )
        else:
            name, body, ids = random.choice(hostile_bodies(self.new_id()))
            self.record(f"hostile: {name}", *await main.send("POST", body, session), ids)


async def server_state(url: str, within: float = 15.0) -> dict[str, Any]:
    """What the server holds once the traffic has stopped (the test site's ``test/stats``), waiting up to
    ``within`` seconds for its in-flight requests to end; empty when the server has no such method."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    probe = Client(parts.hostname or "127.0.0.1", parts.port or 80, parts.path or "/mcp")
    await probe.connect()
    session = await probe.initialize(LATEST)
    stats: dict[str, Any] = {}
    ends = time.monotonic() + within
    while True:
        _, headers, body = await probe.send(
            "POST", dumps({"jsonrpc": "2.0", "id": 1, "method": "test/stats"}), session
        )
        reply = next(iter(replies_in(headers, body)), {})
        stats = reply.get("result", {})
        if not stats or (stats["inflight"] == 0 and stats["ledger_pending"] == 0) or time.monotonic() > ends:
            break
        await asyncio.sleep(0.2)
    await probe.close()
    return stats


async def soak(url: str, seconds: float, concurrency: int, pid: int | None) -> dict[str, Any]:
    figures = Soak(url, seconds)
    rss_before = rss_kib(pid) if pid else None
    started = time.monotonic()
    await asyncio.gather(*(figures.client() for _ in range(concurrency)))
    elapsed = time.monotonic() - started
    state = await server_state(url)
    return {
        "seconds": round(elapsed, 1),
        "concurrency": concurrency,
        "requests": sum(figures.requests.values()),
        "requests_by_action": dict(figures.requests.most_common()),
        "responses": dict(sorted(figures.statuses.items())),
        "5xx": sum(figures.server_errors.values()),
        "5xx_by_action": dict(figures.server_errors.most_common()),
        "ids": dict(figures.ids.most_common()),
        "unanswered": figures.ids["unanswered"],
        "duplicated": figures.ids["answered twice"],
        "hung": figures.hung,
        "inflight_left": state.get("inflight", "n/a"),
        "ledger_pending_left": state.get("ledger_pending", "n/a"),
        "rss_kib_before": rss_before,
        "rss_kib_after": rss_kib(pid) if pid else None,
    }


def print_figures(figures: dict[str, Any]) -> None:
    print(
        f"soak: {figures['seconds']} s, {figures['concurrency']} clients, {figures['requests']} HTTP requests"
    )
    for key in ("requests_by_action", "responses", "5xx_by_action", "ids"):
        print(f"  {key.replace('_', ' ')}:")
        for name, count in figures[key].items():
            print(f"    {name:36} {count:>8}")
    for key in (
        "5xx",
        "unanswered",
        "duplicated",
        "hung",
        "inflight_left",
        "ledger_pending_left",
        "rss_kib_before",
        "rss_kib_after",
    ):
        print(f"  {key.replace('_', ' '):38} {figures[key]!s:>8}")


@contextlib.contextmanager
def own_server(postgres: bool, redis: bool) -> Iterator[tuple[str, int]]:
    """The test site on Daphne, ``DEBUG`` off (on SQLite unless ``postgres``; in memory unless ``redis``)."""
    from tests.support.live import DAPHNE, REDIS_URL, postgres_database, redis_namespace, start_command

    with contextlib.ExitStack() as stack:
        env = {"DJANGO_DEBUG": "0", "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost"}
        if postgres:
            env["DATABASE_URL"] = stack.enter_context(postgres_database())
        if redis:
            env.update(REDIS_URL=REDIS_URL, MCP_TEST_REDIS_PREFIX=stack.enter_context(redis_namespace()))
        directory = Path(tempfile.mkdtemp(prefix="mcp-soak-"))
        server = start_command(directory, DAPHNE, {"RESPONSE_MODE": "auto"}, name="soak", env=env)
        stack.callback(server.stop)
        yield server.url, server.process.pid


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--url", help="an already running server (default: start the test site)")
    parser.add_argument("--pid", type=int, help="its process id, for its RSS (with --url)")
    parser.add_argument(
        "--postgres", action="store_true", help="own server: a fresh database on local PostgreSQL"
    )
    parser.add_argument(
        "--redis", action="store_true", help="own server: channel layer and cache on local Redis"
    )
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: a new one)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    args = parser.parse_args()
    random.seed(args.seed)
    with contextlib.ExitStack() as stack:
        url, pid = (
            (args.url, args.pid) if args.url else stack.enter_context(own_server(args.postgres, args.redis))
        )
        figures = asyncio.run(soak(url, args.seconds, args.concurrency, pid))
    if args.json:
        print(json.dumps(figures))
    else:
        print_figures(figures)


if __name__ == "__main__":
    main()
