"""A small load generator for MCP over Streamable HTTP: raw sockets, HTTP/1.1 keep-alive, one session each.

Each of ``--concurrency`` connections opens its own session (``initialize``), then sends ``tools/call``
requests back to back until ``--requests`` have been sent in all. Prints one JSON object: requests, seconds,
req/s, p50/p90/p99 in ms, and per-id counts (answered, duplicated, missing, HTTP errors, JSON-RPC errors).
Kept free of HTTP libraries so that the client's own cost stays small and the same for every server it drives.

``--era 2026``: no handshake; every request is a 2026-07-28 one, the revision in its ``_meta``
(``io.modelcontextprotocol/protocolVersion``, the client's capabilities and info) and in its headers
(``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``). ``--handshakes``: instead of calls, each connection
opens sessions back to back (``initialize`` + ``notifications/initialized``, timed together), ``--requests``
of them in all, left open; req/s is then handshakes per second.

    python bench/loadgen.py --url http://127.0.0.1:8000/mcp --concurrency 16 --requests 4000
    python bench/loadgen.py --url http://127.0.0.1:8000/mcp --era 2026
    python bench/loadgen.py --url http://127.0.0.1:8000/mcp --concurrency 8 --handshakes
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

__all__ = ["Result", "run"]

VERSION = "2025-11-25"
MODERN = "2026-07-28"
ERAS = ("2025", "2026")
CLIENT_INFO = {"name": "loadgen", "version": "1"}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
}


@dataclass
class Result:
    latencies: list[float] = field(default_factory=list)
    answered: int = 0
    duplicated: int = 0
    missing: int = 0
    http_errors: int = 0
    rpc_errors: int = 0
    seconds: float = 0.0


class Connection:
    """One keep-alive HTTP/1.1 connection carrying one MCP session (``era`` 2025) or none (2026)."""

    def __init__(self, host: str, port: int, path: str, bearer: str | None = None, era: str = "2025") -> None:
        self.host, self.port, self.path, self.era = host, port, path, era
        self.auth = [f"Authorization: Bearer {bearer}"] if bearer else []
        self.session_id: str | None = None
        self.reader: asyncio.StreamReader
        self.writer: asyncio.StreamWriter

    async def connect(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def open(self) -> None:
        """Connect, and open a session in the handshake era."""
        await self.connect()
        if self.era == "2025":
            await self.handshake()

    async def handshake(self) -> None:
        """``initialize`` then ``notifications/initialized``: a new session, this connection's from now on."""
        self.session_id = None
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": CLIENT_INFO},
        }
        status, headers, body = await self.post(init)
        if status != 200 or "mcp-session-id" not in headers:
            raise RuntimeError(f"initialize failed: {status} {headers}")
        if not any(m.get("id") == 0 and "result" in m for m in replies_in(headers, body)):
            raise RuntimeError(f"initialize answered no result: {body[:200]!r}")
        self.session_id = headers["mcp-session-id"]
        status, _, _ = await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        if status != 202:
            raise RuntimeError(f"notifications/initialized answered {status}")

    def tool_call(self, request_id: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A ``tools/call`` request of this connection's era."""
        params: dict[str, Any] = {"name": tool, "arguments": arguments}
        if self.era == "2026":
            params["_meta"] = MODERN_META
        return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}

    async def post(self, message: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        body = json.dumps(message, separators=(",", ":")).encode()
        head = [
            f"POST {self.path} HTTP/1.1",
            f"Host: {self.host}:{self.port}",
            "Content-Type: application/json",
            "Accept: application/json, text/event-stream",
            f"Content-Length: {len(body)}",
            *self.auth,
        ]
        if self.era == "2026":
            head += [f"MCP-Protocol-Version: {MODERN}", f"Mcp-Method: {message['method']}"]
            if message["method"] == "tools/call":
                head.append(f"Mcp-Name: {message['params']['name']}")
        elif self.session_id:
            head += [f"Mcp-Session-Id: {self.session_id}", f"MCP-Protocol-Version: {VERSION}"]
        self.writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        return await self._response()

    async def _response(self) -> tuple[int, dict[str, str], bytes]:
        raw = await self.reader.readuntil(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if ":" in line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        if "content-length" in headers:
            body = await self.reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                chunk = await self.reader.readexactly(size + 2)
                if size == 0:
                    break
                parts.append(chunk[:-2])
            body = b"".join(parts)
        else:
            body = b""
        return status, headers, body

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


def replies_in(headers: dict[str, str], body: bytes) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a response body, whether JSON or an event stream."""
    if not body:
        return []
    if headers.get("content-type", "").startswith("text/event-stream"):
        found = []
        for line in body.decode().splitlines():
            if line.startswith("data:") and line[5:].strip():
                found.append(json.loads(line[5:]))
        return found
    payload = json.loads(body)
    return payload if isinstance(payload, list) else [payload]


async def _connections(
    url: str, concurrency: int, bearer: str | None, era: str, *, sessions: bool = True
) -> list[Connection]:
    """``concurrency`` connections, open (``sessions``: with a session each in the 2025 era)."""
    parts = urlsplit(url)
    connections = [
        Connection(parts.hostname or "127.0.0.1", parts.port or 80, parts.path or "/", bearer, era)
        for _ in range(concurrency)
    ]
    await asyncio.gather(*(c.open() if sessions else c.connect() for c in connections))
    return connections


async def _drive(
    url: str,
    concurrency: int,
    requests: int,
    tool: str,
    arguments: dict[str, Any],
    bearer: str | None = None,
    era: str = "2025",
) -> Result:
    result = Result()
    connections = await _connections(url, concurrency, bearer, era)
    remaining = requests

    async def loop(conn: Connection) -> None:
        nonlocal remaining
        next_id = 1
        while remaining > 0:
            remaining -= 1
            request_id = next_id
            next_id += 1
            message = conn.tool_call(request_id, tool, arguments)
            started = time.perf_counter()
            status, headers, body = await conn.post(message)
            result.latencies.append(time.perf_counter() - started)
            if status != 200:
                result.http_errors += 1
                continue
            mine = [m for m in replies_in(headers, body) if m.get("id") == request_id and "method" not in m]
            if len(mine) > 1:
                result.duplicated += 1
            elif not mine:
                result.missing += 1
            elif "result" in mine[0]:
                result.answered += 1
            else:
                result.rpc_errors += 1

    return await _timed(connections, loop, result)


async def _timed(
    connections: list[Connection], loop: Callable[[Connection], Awaitable[None]], result: Result
) -> Result:
    """Run ``loop`` on every connection at once, time the whole, then close the connections."""
    started = time.perf_counter()
    await asyncio.gather(*(loop(c) for c in connections))
    result.seconds = time.perf_counter() - started
    await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)
    return result


async def _drive_handshakes(url: str, concurrency: int, handshakes: int, bearer: str | None = None) -> Result:
    """``handshakes`` sessions opened back to back on ``concurrency`` connections, none of them closed."""
    result = Result()
    connections = await _connections(url, concurrency, bearer, "2025", sessions=False)
    remaining = handshakes

    async def loop(conn: Connection) -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            started = time.perf_counter()
            try:
                await conn.handshake()
            except RuntimeError:
                result.http_errors += 1
                continue
            finally:
                result.latencies.append(time.perf_counter() - started)
            result.answered += 1

    return await _timed(connections, loop, result)


def percentile(sorted_values: list[float], share: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * share))]


def run(
    url: str,
    concurrency: int,
    requests: int,
    tool: str = "echo",
    arguments: dict[str, Any] | None = None,
    bearer: str | None = None,
    era: str = "2025",
    handshakes: bool = False,
) -> dict[str, Any]:
    """Drive ``url`` and summarise (see the module docstring); ``bearer``: the token every request carries;
    ``era``: ``2025`` (a session per connection) or ``2026`` (sessionless requests); ``handshakes``: open
    ``requests`` sessions instead of calling a tool."""
    if handshakes:
        driving = _drive_handshakes(url, concurrency, requests, bearer)
    else:
        driving = _drive(url, concurrency, requests, tool, arguments or {"text": "x"}, bearer, era)
    result = asyncio.run(driving)
    latencies = sorted(result.latencies)
    elapsed = result.seconds
    return {
        "requests": requests,
        "seconds": elapsed,
        "rps": requests / elapsed if elapsed else 0.0,
        "p50": percentile(latencies, 0.50) * 1000,
        "p90": percentile(latencies, 0.90) * 1000,
        "p99": percentile(latencies, 0.99) * 1000,
        "answered": result.answered,
        "duplicated": result.duplicated,
        "missing": result.missing,
        "http_errors": result.http_errors,
        "rpc_errors": result.rpc_errors,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", required=True)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--tool", default="echo")
    parser.add_argument("--bearer", default=None, help="send Authorization: Bearer <this> with every request")
    parser.add_argument(
        "--era", default="2025", choices=ERAS, help="2025: sessions; 2026: 2026-07-28 requests"
    )
    parser.add_argument("--handshakes", action="store_true", help="open --requests sessions instead of calls")
    args = parser.parse_args()
    figures = run(
        args.url, args.concurrency, args.requests, args.tool, None, args.bearer, args.era, args.handshakes
    )
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
