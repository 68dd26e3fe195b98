"""The one guard every ``MCP_SERVER`` check shares, and the value tests the checks use."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from django.conf import settings
from django.core.checks import CheckMessage, Tags, register

from ..conf import MCPSettings

__all__ = ["GUARDED", "SettingsCheck", "mcp_check", "number", "positive_int", "seconds", "url_options"]

SettingsCheck = Callable[..., list[CheckMessage]]
"""A registered system check: ``check(app_configs=None, **kwargs)``."""

GUARDED: list[SettingsCheck] = []
"""Every check registered through :func:`mcp_check`, in the order of registration."""


def mcp_check(check: Callable[[MCPSettings], list[CheckMessage]]) -> SettingsCheck:
    """Register ``check`` as a system check (``Tags.compatibility``) of the ``MCP_SERVER`` settings: it is
    called with them, and not at all when ``MCP_SERVER`` is not a dict (``mcp_server.E000`` says so)."""

    def run(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
        if not isinstance(getattr(settings, "MCP_SERVER", {}), dict):
            return []  # E000 says so
        return check(MCPSettings.from_django())

    # Named as the check, but with its own signature: Django's registry refuses a check without **kwargs,
    # and functools.wraps would show it the wrapped one's.
    run.__name__, run.__qualname__, run.__doc__ = check.__name__, check.__qualname__, check.__doc__
    run.__module__ = check.__module__
    register(Tags.compatibility)(run)
    GUARDED.append(run)
    return run


def positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def number(value: Any) -> bool:
    """A positive, finite number (not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < float("inf")


def seconds(value: Any) -> float | None:
    """``value`` as a positive, finite number of seconds (a string too, as in a Redis URL), else ``None``."""
    try:
        found = float(value)
    except (TypeError, ValueError):
        return None
    return None if isinstance(value, bool) or not number(found) else found


def url_options(address: Any) -> dict[str, str]:
    """The query options of a Redis URL (``redis://host/0?socket_timeout=15``)."""
    return dict(parse_qsl(urlsplit(address).query)) if isinstance(address, str) else {}
