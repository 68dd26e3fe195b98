"""``MAX_REQUEST_BYTES`` holds before a body is read, on real servers (Daphne and Uvicorn), over raw sockets.

A body announced larger than the limit is refused from its ``Content-Length`` before any of it is sent; a
chunked one as soon as the running count passes the limit; either way the 413 reaches a client that is
still sending, and the server's memory does not grow with what the client pushes. (Which paths the limit
covers: ``tests/transports/test_body_limit.py``.)
"""

from __future__ import annotations

import select
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from mcp_server.transports.body_limit import LINGER
from tests.support.live import ROOT, LiveServer, base_env, free_port, migrated_template, wait_for_port
from tests.support.raw import mcp_headers, rpc
from tests.support.sockets import read_response

LIMIT = 65536
CHUNK = 16 * 1024
HUGE = 200 * 1024 * 1024


def start_uvicorn(directory: Path, overrides: dict[str, object]) -> LiveServer:
    """The test site under Uvicorn, which calls the application before the body (no early refusal of
    its own): the consumer's check is what answers there."""
    database = directory / "uvicorn.sqlite3"
    shutil.copy(migrated_template(directory), database)
    env = base_env(database, overrides)
    port = free_port()
    log_path = directory / f"uvicorn-{port}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "project.asgi:application",
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    server = LiveServer(port=port, process=process, log_path=log_path, env=env)
    try:
        wait_for_port(port, process)
    except Exception:
        server.stop()
        raise
    return server


@pytest.fixture(scope="module", params=["daphne", "uvicorn"])
def server(
    request: pytest.FixtureRequest, start: Callable[..., LiveServer], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    overrides = {"MAX_REQUEST_BYTES": LIMIT}
    if request.param == "daphne":
        yield start(overrides)
        return
    uvicorn = start_uvicorn(tmp_path_factory.mktemp("uvicorn"), overrides)
    yield uvicorn
    uvicorn.stop()


def head(port: int, *, length: int | None = None, path: str = "/mcp") -> bytes:
    """A POST's request line and headers: ``Content-Length`` when given, else chunked."""
    lines = [
        f"POST {path} HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked",
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def chunked(size: int) -> bytes:
    return f"{size:x}\r\n".encode() + b" " * size + b"\r\n"


def connect(server: LiveServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
    return sock


def send_until_answered(sock: socket.socket, pieces: Iterator[bytes], budget: int) -> int:
    """Send ``pieces`` until the server answers; returns the bytes sent by then. Fails if ``budget`` bytes
    were sent without an answer."""
    sent = 0
    while True:
        readable, writable, _ = select.select([sock], [sock], [], 10)
        if readable:
            return sent
        assert writable, "the server neither answered nor read"
        sock.sendall(next(pieces))
        sent += CHUNK
        assert sent <= budget, f"{sent} bytes sent and still no answer"


def assert_refused(status: int, body: bytes) -> None:
    assert status == 413
    assert httpx.Response(413, content=body).json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": f"Request body larger than {LIMIT} bytes"},
    }


def test_an_announced_length_over_the_limit_is_refused_before_the_body(server: LiveServer) -> None:
    with connect(server) as sock:
        sock.sendall(head(server.port, length=HUGE))
        readable, _, _ = select.select([sock], [], [], 10)
        assert readable, "no answer to the headers alone"
        assert_refused(*read_response(sock))
        sock.sendall(b" " * CHUNK)  # the client could still send: the answer came first


def test_a_client_expecting_100_continue_gets_the_413_and_nothing_else(server: LiveServer) -> None:
    """curl's way with large bodies: it waits for "100 Continue", which must not come after the refusal."""
    with connect(server) as sock:
        sock.sendall(head(server.port, length=HUGE).replace(b"\r\n\r\n", b"\r\nExpect: 100-continue\r\n\r\n"))
        status, body = read_response(sock)
        assert_refused(status, body)
        sock.settimeout(LINGER + 5)
        assert sock.recv(65536) == b""  # the end of the connection, no interim response


def test_a_chunked_body_is_refused_once_past_the_limit(server: LiveServer) -> None:
    with connect(server) as sock:
        sock.sendall(head(server.port))
        sent = send_until_answered(sock, iter(lambda: chunked(CHUNK), b""), budget=LIMIT + 4 * 1024 * 1024)
        assert sent > LIMIT - CHUNK  # not refused for its framing, but for its size
        assert_refused(*read_response(sock))
        sock.sendall(chunked(CHUNK))  # still open for sending when the answer arrived


def test_a_body_within_the_limit_is_served(server: LiveServer) -> None:
    payload = rpc(
        "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x"}}
    )
    padded = {
        **payload,
        "params": {**payload["params"], "capabilities": {"experimental": {"pad": " " * 30_000}}},
    }
    response = httpx.post(server.url, json=padded, headers=mcp_headers(), timeout=20)
    assert response.status_code == 200, response.text


def test_a_form_content_type_reaches_the_endpoint_unparsed(server: LiveServer) -> None:
    """Daphne's Twisted parses a POSTed form into ``request.args`` (which Daphne never reads) and answers a
    malformed multipart body with its own bare 400; on the MCP endpoint nothing parses a form, so the
    endpoint's own answer comes: a JSON-RPC error about the content type."""
    headers = {**mcp_headers(), "Content-Type": "multipart/form-data"}  # no boundary: not a multipart
    response = httpx.post(server.url, content=b"--x\r\nnot a form part", headers=headers, timeout=20)
    assert response.status_code == 415, response.text
    assert response.json()["error"]["code"] == -32600


def test_an_ordinary_client_streaming_too_much_reads_the_413(server: LiveServer) -> None:
    """httpx sends its whole body before it reads: the refused connection lingers long enough for that."""
    body = iter([b" " * (1024 * 1024)] * 20)
    response = httpx.post(
        server.url,
        content=body,
        headers={**mcp_headers(), "Content-Length": str(20 * 1024 * 1024)},
        timeout=30,
    )
    assert_refused(response.status_code, response.content)


def rss(server: LiveServer) -> int:
    """The server process's resident memory, in bytes."""
    status = Path(f"/proc/{server.process.pid}/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


def push(server: LiveServer, *, announced: bool, total: int) -> int:
    """Send up to ``total`` body bytes as fast as the server takes them, whatever it answers; returns how
    many it took before it closed the connection."""
    sent = 0
    with connect(server) as sock:
        sock.sendall(head(server.port, length=total if announced else None))
        piece = b" " * (256 * 1024) if announced else chunked(256 * 1024)
        try:
            while sent < total:
                sock.sendall(piece)
                sent += 256 * 1024
        except OSError:  # closed by the server after its answer and a linger
            pass
    return sent


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_the_servers_memory_does_not_grow_with_a_refused_body(server: LiveServer) -> None:
    assert httpx.post(server.url, json=rpc("ping"), headers=mcp_headers(), timeout=20).status_code in (
        400,
        404,
    )
    before = rss(server)
    pushed = push(server, announced=True, total=HUGE) + push(server, announced=False, total=HUGE)
    assert httpx.post(server.url, json=rpc("ping"), headers=mcp_headers(), timeout=20).status_code in (
        400,
        404,
    )
    grown = rss(server) - before
    assert grown < 50 * 1024 * 1024, f"RSS grew by {grown} bytes after {pushed} bytes were pushed"


def test_other_paths_keep_their_own_rules(server: LiveServer) -> None:
    """The early refusal is for the MCP endpoints only: Django's pages see their bodies as before."""
    response = httpx.post(
        f"{server.base}/admin/login/",
        content=b"x=" + b"y" * (LIMIT * 2),
        timeout=20,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert response.status_code == 403  # Django's CSRF refusal: the body reached Django


def test_time_to_answer_is_short(server: LiveServer) -> None:
    """The refusal does not wait for the body: it comes well before a 200 MB upload could finish."""
    with connect(server) as sock:
        started = time.monotonic()
        sock.sendall(head(server.port, length=HUGE))
        status, _body = read_response(sock)
        assert status == 413
        assert time.monotonic() - started < 10
