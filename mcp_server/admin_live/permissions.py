"""Who may watch the live page and who may act on requests and sessions."""

from __future__ import annotations

from typing import Any

__all__ = ["ABORT_PERMISSION", "END_SESSION_PERMISSION", "VIEW_PERMISSIONS", "may_abort", "may_watch"]

VIEW_PERMISSIONS = ("mcp_server.view_ledgerentry", "mcp_server.change_ledgerentry")
"""Either one lets active staff watch the pending requests (the admin's rule: change implies view)."""

ABORT_PERMISSION = "mcp_server.change_ledgerentry"
"""Needed to abort requests."""

END_SESSION_PERMISSION = "mcp_server.change_session"
"""Needed to end sessions."""


def _staff(user: Any) -> bool:
    return bool(user is not None and user.is_active and user.is_staff)


def may_watch(user: Any) -> bool:
    """Active staff with the view (or change) permission on ledger entries. Touches the database."""
    return _staff(user) and any(user.has_perm(perm) for perm in VIEW_PERMISSIONS)


def may_abort(user: Any) -> bool:
    """Active staff with the change permission on ledger entries. Touches the database."""
    return _staff(user) and bool(user.has_perm(ABORT_PERMISSION))
