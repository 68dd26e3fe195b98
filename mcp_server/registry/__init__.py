"""Handlers registered by decorators, with JSON Schemas derived from their type hints."""
