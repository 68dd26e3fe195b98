"""Transports: Streamable HTTP (Channels consumer) and stdio (management command)."""
