"""Checks of the rate-limit settings.

- ``mcp_server.E070`` ``RATE_LIMITS`` is not a list of valid rules (zero, negative or absurd counts and
  periods, an unknown ``per`` or ``target``, a ``burst`` above the rate's count)
- ``E071`` ``RATE_LIMIT_CACHE_ALIAS`` names no cache, ``E072`` ``RATE_LIMIT_FAIL_OPEN`` is not a boolean,
  ``E073`` ``RATE_LIMIT_ERROR_CODE`` is not an integer allowed by the error-code rules, ``E074``
  ``RATE_LIMIT_RELOAD`` is neither ``None`` nor a positive number of seconds
- ``E075`` ``RATE_LIMIT_REFUSAL`` is neither ``"error"`` nor ``"tool_result"``, ``E076``
  ``RATE_LIMIT_HTTP_429`` is not a boolean, ``E077`` ``QUOTAS`` is not a list of valid quotas (a zero,
  negative or absurd ``quota``, a ``period`` other than ``day`` or ``month``, an unknown ``per``, ``target``
  or key)
"""

from __future__ import annotations

from django.conf import settings
from django.core.checks import CheckMessage, Error

from ..conf import MCPSettings
from ..core.limit_rules import parse_quotas, parse_rules
from ..protocol.limit_refusal import REFUSAL_SHAPES
from .base import mcp_check, number

__all__ = ["check_rate_limits"]

SEP_3304_CODE = -32023
"""The code SEP-3304 proposes: refused while it is not in the specification, like every -32020..-32099."""

_TAKEN = range(-32005, -31999)
"""The codes this server already answers with (-32000 to -32005)."""


def _code_problem(code: object) -> str | None:
    if not isinstance(code, int) or isinstance(code, bool):
        return "must be an integer"
    if code in _TAKEN:
        return "is one of the codes this server already uses (-32000 to -32005)"
    if -32099 <= code <= -32020:
        return "is in -32020..-32099, reserved for codes the MCP specification defines"
    if -32768 <= code < -32099:
        return "is in JSON-RPC's reserved range of predefined errors"
    return None


@mcp_check
def check_rate_limits(conf: MCPSettings) -> list[CheckMessage]:
    """E070 to E077: the rate-limit and quota settings."""
    messages: list[CheckMessage] = []
    try:
        parse_rules(conf.RATE_LIMITS)
    except ValueError as exc:
        messages.append(Error(f"MCP_SERVER['RATE_LIMITS']: {exc}.", id="mcp_server.E070"))
    alias = conf.RATE_LIMIT_CACHE_ALIAS
    if not isinstance(alias, str) or alias not in getattr(settings, "CACHES", {"default": {}}):
        text = f"MCP_SERVER['RATE_LIMIT_CACHE_ALIAS'] {alias!r} is not a key of CACHES."
        messages.append(Error(text, id="mcp_server.E071"))
    if not isinstance(conf.RATE_LIMIT_FAIL_OPEN, bool):
        text = "MCP_SERVER['RATE_LIMIT_FAIL_OPEN'] must be True or False."
        messages.append(Error(text, id="mcp_server.E072"))
    problem = _code_problem(conf.RATE_LIMIT_ERROR_CODE)
    if problem is not None:
        text = f"MCP_SERVER['RATE_LIMIT_ERROR_CODE'] {conf.RATE_LIMIT_ERROR_CODE!r} {problem}."
        messages.append(Error(text, id="mcp_server.E073"))
    reload = conf.RATE_LIMIT_RELOAD
    if reload is not None and not number(reload):
        text = "MCP_SERVER['RATE_LIMIT_RELOAD'] must be None or a positive number of seconds."
        messages.append(Error(text, id="mcp_server.E074"))
    return messages + _refusal_and_quotas(conf)


def _refusal_and_quotas(conf: MCPSettings) -> list[CheckMessage]:
    messages: list[CheckMessage] = []
    if conf.RATE_LIMIT_REFUSAL not in REFUSAL_SHAPES:
        text = (
            f"MCP_SERVER['RATE_LIMIT_REFUSAL'] {conf.RATE_LIMIT_REFUSAL!r} is not 'error' or 'tool_result'."
        )
        messages.append(Error(text, id="mcp_server.E075"))
    if not isinstance(conf.RATE_LIMIT_HTTP_429, bool):
        text = "MCP_SERVER['RATE_LIMIT_HTTP_429'] must be True or False."
        messages.append(Error(text, id="mcp_server.E076"))
    try:
        parse_quotas(conf.QUOTAS)
    except ValueError as exc:
        messages.append(Error(f"MCP_SERVER['QUOTAS']: {exc}.", id="mcp_server.E077"))
    return messages
