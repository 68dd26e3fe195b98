"""What travels: JSON-RPC envelopes and errors, protocol revisions, and the messages between worker processes.

The lowest layer of the package (with ``mcp_server.conf``): it imports nothing else of ``mcp_server``.
"""
