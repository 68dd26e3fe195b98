"""JSON-RPC envelope, protocol revisions, lifecycle and dispatch."""
