"""HTTP on a raw socket: a response read as the server wrote it."""

from __future__ import annotations

import socket

__all__ = ["read_response"]


def read_response(sock: socket.socket) -> tuple[int, bytes]:
    """Status and body of the one response on ``sock`` (framed by ``Content-Length`` or chunked)."""
    data = b""

    def more() -> None:
        nonlocal data
        part = sock.recv(65536)
        assert part, f"connection closed inside the response: {data!r}"
        data += part

    while b"\r\n\r\n" not in data:
        more()
    header, _, _ = data.partition(b"\r\n\r\n")
    status = int(header.split(b" ", 2)[1])
    fields = dict(line.lower().split(b": ", 1) for line in header.split(b"\r\n")[1:])
    if b"content-length" in fields:
        while len(data.partition(b"\r\n\r\n")[2]) < int(fields[b"content-length"]):
            more()
        return status, data.partition(b"\r\n\r\n")[2][: int(fields[b"content-length"])]
    assert fields.get(b"transfer-encoding") == b"chunked", header
    while not data.endswith(b"0\r\n\r\n"):
        more()
    rest, body = data.partition(b"\r\n\r\n")[2], b""
    while True:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            return status, body
        body, rest = body + rest[:size], rest[size + 2 :]
