"""A server for ``mcp_stdio --server tests.support.stdio_noise.server``
(``tests/end_to_end/transports/test_stdio.py``).

Importing it prints to stdout, before the command claims stdout for the protocol; its tool reads the
process's stdin as a handler might.
"""

from __future__ import annotations

import os

from mcp_server import MCPServer

print("stdio_noise: printed while importing")  # the point of this module

server = MCPServer("stdio_noise")


@server.tool
def stdio_read_stdin() -> str:
    """What a handler reading file descriptor 0 gets: end of file at once (it is /dev/null)."""
    return os.read(0, 65536).decode(errors="replace")
