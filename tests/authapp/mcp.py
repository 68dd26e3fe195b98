"""Handlers for the authentication and permission tests (on the default server)."""

from __future__ import annotations

from typing import Any

from mcp_server import Context, mcp


@mcp.tool
async def whoami(ctx: Context) -> dict[str, Any]:
    """Who the server thinks is calling, and with which token."""
    user = ctx.user
    token = getattr(ctx.request, "auth", None)
    return {
        "user": user.get_username() if getattr(user, "is_authenticated", False) else None,
        "token": getattr(token, "name", None),
    }


@mcp.tool(permission="catalogue.add_loan")
async def lend(book: str) -> str:
    """Needs the permission ``catalogue.add_loan``."""
    return f"lent {book}"


@mcp.tool(permission=lambda user: bool(user.is_staff))
def staff_only() -> str:
    """Needs a staff user (a permission callable, run in a worker thread)."""
    return "staff"


@mcp.resource("auth://ledger", mime_type="text/plain", permission="catalogue.add_loan")
async def secret_ledger() -> str:
    """A resource only lenders may read."""
    return "the lending ledger"


@mcp.resource("auth://notes/{pk}", mime_type="text/plain", permission="catalogue.add_loan")
async def secret_note(pk: int) -> str:
    """A resource template only lenders may read."""
    return f"note {pk}"


@mcp.prompt(permission="catalogue.add_loan")
def lending_letter(borrower: str) -> str:
    """A prompt only lenders may get."""
    return f"Write to {borrower} about their loan."
