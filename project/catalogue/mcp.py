"""The catalogue's MCP tools, resources and prompts (discovered like admin.py)."""

from __future__ import annotations

from django.db import transaction
from django.db.models import F, Q
from pydantic import BaseModel

from mcp_server import App, Context, ToolError, expose_form, expose_model, expose_viewset, mcp
from project.mcp_servers import staff

from .api import BookViewSet
from .forms import AuthorForm, ReturnForm, return_book
from .models import Book, Loan


class BookOut(BaseModel):
    id: int
    title: str
    author: str
    year: int
    isbn: str
    copies_available: int


def _out(book: Book) -> BookOut:
    return BookOut(
        id=book.pk,
        title=book.title,
        author=book.author.name,
        year=book.year,
        isbn=book.isbn,
        copies_available=book.copies_available,
    )


BOOK_CARDS = App("catalogue/book_cards.html", title="Book cards", prefers_border=True)
"""The view of a search (MCP Apps): the results as cards, each with a button that reserves a copy."""


@mcp.tool(annotations={"readOnlyHint": True}, app=BOOK_CARDS)
async def search_books(query: str, limit: int = 10) -> list[BookOut]:
    """Find books whose title or author contains the query."""
    books = Book.objects.select_related("author").filter(
        Q(title__icontains=query) | Q(author__name__icontains=query)
    )
    return [_out(book) async for book in books[: max(1, min(limit, 50))]]


@mcp.tool(annotations={"readOnlyHint": True})
async def get_book(book_id: int) -> BookOut:
    """One book by its id."""
    book = await Book.objects.select_related("author").filter(pk=book_id).afirst()
    if book is None:
        raise ToolError(f"No book with id {book_id}")
    return _out(book)


def _reserve(book_id: int, borrower: str, ctx: Context) -> tuple[Book, Loan]:
    with transaction.atomic():
        updated = Book.objects.filter(pk=book_id, copies_available__gt=0).update(
            copies_available=F("copies_available") - 1
        )
        if not updated:
            raise ToolError(f"Book {book_id} does not exist or has no copy left")
        book = Book.objects.select_related("author").get(pk=book_id)
        loan = Loan.objects.create(book=book, borrower=borrower)
        ctx.claim_answer()  # last: a request cancelled before this point rolls the reservation back
    return book, loan


@mcp.tool(annotations={"destructiveHint": False, "idempotentHint": False})
def reserve_book(book_id: int, borrower: str, ctx: Context) -> str:
    """Reserve one copy of a book for a borrower (a sync handler: runs in a worker thread)."""
    book, loan = _reserve(book_id, borrower, ctx)
    return f"Reserved {book.title!r} for {borrower} (loan {loan.pk}); {book.copies_available} copies left."


@mcp.tool(annotations={"destructiveHint": False, "idempotentHint": False}, app=BOOK_CARDS, visibility=["app"])
def reserve_copy(book_id: int, ctx: Context) -> BookOut:
    """Reserve one copy of a book for the signed-in user: the book cards' button (views only)."""
    user = ctx.user
    borrower = user.get_username() if user is not None and user.is_authenticated else "guest (book cards)"
    book, _loan = _reserve(book_id, borrower, ctx)
    return _out(book)


@mcp.resource("catalogue://books/{pk}", mime_type="application/json", title="A book")
async def book(pk: int) -> BookOut:
    """A book as JSON."""
    found = await Book.objects.select_related("author").filter(pk=pk).afirst()
    if found is None:
        from mcp_server import ResourceNotFound

        raise ResourceNotFound(f"catalogue://books/{pk}")
    return _out(found)


@mcp.resource("catalogue://stats", mime_type="application/json", title="Catalogue statistics")
async def stats() -> dict[str, int]:
    """How many books, authors and loans the catalogue holds."""
    return {
        "books": await Book.objects.acount(),
        "loans": await Loan.objects.acount(),
    }


@mcp.prompt(title="Summarise a book")
async def summarize_book(pk: int) -> str:
    """Ask the model for a short summary of a book in the catalogue."""
    found = await Book.objects.select_related("author").aget(pk=pk)
    return (
        f"Write a three-sentence summary of {found.title!r} by {found.author.name} ({found.year}). "
        f"Catalogue notes: {found.summary}"
    )


# -- the staff server (/staff/mcp): the catalogue's models as read-only query tools ------------------------

expose_model(
    staff,
    Book,
    fields=["id", "title", "author__name", "year", "isbn", "copies_available"],
    filters=["title__icontains", "author__name__icontains", "year", "year__gte", "year__lte"],
    ordering=["title", "year", "copies_available"],
    name="books",
)
expose_model(
    staff,
    Loan,
    fields=["id", "book", "book__title", "borrower", "created"],
    filters=["book", "borrower__icontains", "created__gte"],
    ordering=["created"],
    name="loans",
)


# -- forms as tools: a ModelForm saves the row; a plain Form's handler does the work ---------------------

expose_form(mcp, AuthorForm, name="add_author")  # needs catalogue.add_author
expose_form(mcp, ReturnForm, name="return_book", handler=return_book, permission="catalogue.delete_loan")


# -- the catalogue's REST API (project/catalogue/api.py, also served at /api/books/) as tools ---------------

expose_viewset(mcp, BookViewSet, name="catalogue_books")
