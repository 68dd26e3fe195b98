"""Which request targets ``MAX_REQUEST_BYTES`` covers: the MCP endpoints' paths, whatever the query or an
absolute form, and no other (on live servers: ``tests/end_to_end/transports/test_body_limit.py``)."""

from __future__ import annotations

import pytest

from mcp_server.transports.body_limit import limited_path


@pytest.mark.parametrize(
    ("target", "limited"),
    [
        (b"/mcp", True),
        (b"/mcp/", True),
        (b"/mcp?x=1", True),
        (b"/%6Dcp", True),
        (b"http://example.org/mcp", True),
        (b"/prefix/mcp", True),
        (b"/mcpx", False),
        (b"/notmcp", False),
        (b"/admin/login/", False),
    ],
)
def test_limited_path(target: bytes, limited: bool) -> None:
    assert limited_path(target, frozenset({"/mcp"})) is limited


def test_a_root_endpoint_limits_the_root_only() -> None:
    assert limited_path(b"/", frozenset({""}))
    assert not limited_path(b"/admin/", frozenset({""}))
