"""What every layer above shares: the request ``Context``, the states of a request, and the ledger's record
and store interface. Imports only ``mcp_server.conf`` and ``mcp_server.wire``.
"""
