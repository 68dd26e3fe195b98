"""What travels: JSON-RPC envelopes and errors, protocol revisions, the messages between worker processes, and
the ASGI messages of an HTTP response (:mod:`.asgi`).

The lowest layer of the package (with ``mcp_server.conf``): it imports nothing else of ``mcp_server``.
"""
