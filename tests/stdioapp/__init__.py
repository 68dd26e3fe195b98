"""Handlers for the stdio tests only (installed by ``tests.stdio_settings``)."""
