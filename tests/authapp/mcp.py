"""Handlers for the authentication and permission tests (on the default server)."""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_save
from django.dispatch import receiver

from mcp_server import Context, expose_model, mcp
from project.catalogue.models import Book


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


# -- expose_model with write tools (tests/registry/test_model_writes.py) -----------------------------------

expose_model(
    mcp,
    Book,
    fields=["id", "title", "author", "author__name", "year", "isbn"],
    lookup="isbn",
    name="shelf",
    writes=True,
)


@receiver(post_save, sender=Book)
def fail_after_saving(instance: Book, **kwargs: Any) -> None:
    """A save that fails after its row is written: the write tool's transaction must leave nothing."""
    if instance.title == "Rollback me":
        raise RuntimeError("failed after the row was written")
