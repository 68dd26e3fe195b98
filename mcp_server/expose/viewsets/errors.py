"""The message of a tool error for a viewset's refusal (a 4xx response), naming each failing field."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["field_errors", "refusal_message"]


def _text(value: Any) -> str:
    return " ".join(str(item) for item in value) if isinstance(value, list | tuple) else str(value)


def field_errors(data: Any, prefix: str = "") -> list[str]:
    """``["title: This field is required.", "author.name: ..."]``: nested serializers give dotted paths,
    items of a list their index (``tags.1: ...``); ``non_field_errors`` and ``detail`` keep their names."""
    if isinstance(data, Mapping):
        out: list[str] = []
        for key, value in data.items():
            out += field_errors(value, f"{prefix}.{key}" if prefix else str(key))
        return out
    if isinstance(data, list | tuple) and any(isinstance(item, Mapping | list | tuple) for item in data):
        out = []
        for index, item in enumerate(data):
            if item:  # DRF gives {} for the items of a list that passed
                out += field_errors(item, f"{prefix}.{index}" if prefix else str(index))
        return out
    text = _text(data)
    return [f"{prefix}: {text}" if prefix else text]


def _detail(data: Any) -> str:
    if isinstance(data, Mapping) and set(data) == {"detail"}:
        return str(data["detail"])
    return "; ".join(field_errors(data))


def refusal_message(status: int, data: Any, retry_after: str | None = None) -> str:
    """What a client is told when the viewset answered ``status`` (4xx) with ``data``."""
    if status == 400:
        return "Invalid arguments: " + "; ".join(field_errors(data))
    if status in (401, 403):
        return f"Permission denied: {_detail(data)}"
    if status == 404:
        return f"Not found: {_detail(data)}"
    if status == 429:
        message = f"Throttled: {_detail(data)}"
        if retry_after:
            message += f" Retry after {retry_after} seconds."
        return message
    return f"Refused ({status}): {_detail(data)}"
