"""Handlers for the authentication and permission tests (on the default server)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.db.models.signals import post_save
from django.dispatch import receiver

from mcp_server import Context, expose_form, expose_model, mcp
from project.catalogue.models import Author, Book
from tests.testapp.models import PickyBook


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


@mcp.resource("auth://public", mime_type="text/plain")
async def public_notice() -> str:
    """A resource anyone may read, beside the lenders' ones (a listen prefix ``auth:`` covers both)."""
    return "opening hours"


@mcp.prompt(permission="catalogue.add_loan")
def lending_letter(borrower: str) -> str:
    """A prompt only lenders may get."""
    return f"Write to {borrower} about their loan."


# -- expose_model with write tools (tests/end_to_end/registry/test_model_writes.py) --------------------------

expose_model(
    mcp,
    Book,
    fields=["id", "title", "author", "author__name", "year", "isbn"],
    lookup="isbn",
    name="shelf",
    writes=True,
)


def own_books(ctx: Context) -> Any:
    """A user's own books: those whose ISBN starts with their username and a dash (``carol-1``)."""
    return Book.objects.filter(isbn__startswith=f"{ctx.user.get_username()}-")


def own_authors(ctx: Context) -> Any:
    """A user's own authors: those whose name starts with their username, capitalised (``Carol ...``)."""
    return Author.objects.filter(name__startswith=f"{ctx.user.get_username().title()} ")


def signed_in(user: Any) -> bool:
    return bool(user.is_authenticated)


expose_model(
    mcp,
    Book,
    fields=["id", "title", "author", "author__name", "year", "isbn"],
    name="own_shelf",
    queryset=own_books,
    permission=signed_in,
    writes=["create", "update"],
    write_permissions={"create": signed_in, "update": signed_in},
    related_querysets={"author": own_authors},
)


@receiver(post_save, sender=Book)
def fail_after_saving(instance: Book, **kwargs: Any) -> None:
    """A save that fails after its row is written: the write tool's transaction must leave nothing."""
    if instance.title == "Rollback me":
        raise RuntimeError("failed after the row was written")


# -- forms as tools (tests/end_to_end/registry/test_form_tools.py) -------------------------------------------


class AuthorForm(forms.ModelForm):  # type: ignore[type-arg]
    """Add an author to the catalogue."""

    class Meta:
        model = Author
        fields = ["name"]

    def clean_name(self) -> str:
        name = str(self.cleaned_data["name"])
        if not name[:1].isupper():
            raise forms.ValidationError("Start the name with a capital letter.")
        return name


class LoanRequestForm(forms.Form):
    """Ask to borrow a book."""

    borrower = forms.CharField(max_length=20)
    book = forms.ModelChoiceField(queryset=Book.objects.all())
    weeks = forms.IntegerField(min_value=1, max_value=8)
    where = forms.ChoiceField(choices=[("home", "At home"), ("reading_room", "In the reading room")])
    note = forms.CharField(required=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("where") == "reading_room" and data.get("weeks", 1) > 1:
            raise forms.ValidationError("The reading room lends for one week at most.")
        return data


def request_loan(form: LoanRequestForm, ctx: Context) -> dict[str, Any]:
    data = form.cleaned_data
    return {
        "book": data["book"].title,
        "borrower": data["borrower"],
        "weeks": data["weeks"],
        "by": str(ctx.user),
    }


class ShelvedBookForm(forms.ModelForm):  # type: ignore[type-arg]
    """Shelve a book by one of the shelved authors (their names start with "Shelved")."""

    author = forms.ModelChoiceField(queryset=Author.objects.filter(name__startswith="Shelved "))

    class Meta:
        model = Book
        fields = ["title", "author", "year", "isbn"]


class PickyBookForm(forms.ModelForm):  # type: ignore[type-arg]
    """Add a picky book: its author field's ``limit_choices_to`` admits only authors named "Picky ..."."""

    class Meta:
        model = PickyBook
        fields = ["title", "author", "year", "isbn"]


expose_form(mcp, AuthorForm, name="author_add")
expose_form(mcp, ShelvedBookForm, name="book_shelve")  # catalogue.add_book: carol may, bob may not
expose_form(mcp, PickyBookForm, name="picky_book_add", permission="catalogue.add_book")
expose_form(mcp, LoanRequestForm, name="loan_request", handler=request_loan, permission="catalogue.add_loan")


@receiver(post_save, sender=Author)
def fail_after_saving_author(instance: Author, **kwargs: Any) -> None:
    """A ModelForm save failing after its row is written: the form tool's transaction must leave nothing."""
    if instance.name == "Rollback Me":
        raise RuntimeError("failed after the row was written")
