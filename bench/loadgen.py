"""A small load generator for MCP over Streamable HTTP: raw sockets, HTTP/1.1 keep-alive, one session each.

Each of ``--concurrency`` connections opens its own session (``initialize``), then sends ``tools/call``
requests back to back until ``--requests`` have been sent in all. Prints one JSON object: requests, seconds,
req/s, p50/p90/p99 in ms, and per-id counts (answered, duplicated, missing, http errors). Kept free of HTTP
libraries so that the client's own cost stays small and the same for every server it drives.

    python bench/loadgen.py --url http://127.0.0.1:8000/mcp --concurrency 16 --requests 4000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

__all__ = ["Result", "run"]

VERSION = "2025-11-25"


@dataclass
class Result:
    latencies: list[float] = field(default_factory=list)
    answered: int = 0
    duplicated: int = 0
    missing: int = 0
    http_errors: int = 0
    seconds: float = 0.0


class Connection:
    """One keep-alive HTTP/1.1 connection carrying one MCP session."""

    def __init__(self, host: str, port: int, path: str, bearer: str | None = None) -> None:
        self.host, self.port, self.path = host, port, path
        self.auth = [f"Authorization: Bearer {bearer}"] if bearer else []
        self.session_id: str | None = None
        self.reader: asyncio.StreamReader
        self.writer: asyncio.StreamWriter

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": VERSION,
                "capabilities": {},
                "clientInfo": {"name": "loadgen", "version": "1"},
            },
        }
        status, headers, _ = await self.post(init)
        if status != 200 or "mcp-session-id" not in headers:
            raise RuntimeError(f"initialize failed: {status} {headers}")
        self.session_id = headers["mcp-session-id"]
        status, _, _ = await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        if status != 202:
            raise RuntimeError(f"notifications/initialized answered {status}")

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
        if self.session_id:
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


async def _drive(
    url: str, concurrency: int, requests: int, tool: str, arguments: dict[str, Any], bearer: str | None = None
) -> Result:
    parts = urlsplit(url)
    result = Result()
    connections = [
        Connection(parts.hostname or "127.0.0.1", parts.port or 80, parts.path or "/", bearer)
        for _ in range(concurrency)
    ]
    await asyncio.gather(*(c.open() for c in connections))
    remaining = requests

    async def loop(conn: Connection) -> None:
        nonlocal remaining
        next_id = 1
        while remaining > 0:
            remaining -= 1
            request_id = next_id
            next_id += 1
            message = {
                "jsonrpc": "2.0",
                "id": request_id,
                "method": "tools/call",
                "params": {"name": tool, "arguments": arguments},
            }
            started = time.perf_counter()
            status, headers, body = await conn.post(message)
            result.latencies.append(time.perf_counter() - started)
            if status != 200:
                result.http_errors += 1
                continue
            mine = [m for m in replies_in(headers, body) if m.get("id") == request_id and "method" not in m]
            if len(mine) == 1:
                result.answered += 1
            elif mine:
                result.duplicated += 1
            else:
                result.missing += 1

    started = time.perf_counter()
    await asyncio.gather(*(loop(c) for c in connections))
    result.seconds = time.perf_counter() - started
    await asyncio.gather(*(c.close() for c in connections), return_exceptions=True)
    return result


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
) -> dict[str, Any]:
    """Drive ``url`` and summarise (see the module docstring); ``bearer``: the token every request carries."""
    result = asyncio.run(_drive(url, concurrency, requests, tool, arguments or {"text": "x"}, bearer))
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
    args = parser.parse_args()
    print(json.dumps(run(args.url, args.concurrency, args.requests, args.tool, bearer=args.bearer)))


if __name__ == "__main__":
    main()
