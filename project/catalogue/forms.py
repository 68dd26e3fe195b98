"""Forms of the catalogue, served as MCP tools too (``expose_form`` in ``mcp.py``)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.db.models import F

from mcp_server import Context, ToolError

from .models import Author, Book, Loan


class AuthorForm(forms.ModelForm):  # type: ignore[type-arg]
    """Add an author to the catalogue."""

    class Meta:
        model = Author
        fields = ["name"]


class ReturnForm(forms.Form):
    """Record that a borrower brought a book back: the loan ends and the copy is available again."""

    loan = forms.ModelChoiceField(queryset=Loan.objects.select_related("book"))
    borrower = forms.CharField(max_length=200, help_text="Who borrowed it, as on the loan.")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        loan, borrower = data.get("loan"), data.get("borrower")
        if loan is not None and borrower and loan.borrower != borrower:
            raise forms.ValidationError("This loan is not in that borrower's name.")
        return data


def return_book(form: ReturnForm, ctx: Context) -> dict[str, Any]:
    """The handler of the ``return_book`` tool (sync: it runs in a worker thread, in its own transaction).

    ``ctx.claim_answer()`` comes last in the transaction: a request cancelled before it rolls back."""
    from django.db import transaction

    loan: Loan = form.cleaned_data["loan"]
    with transaction.atomic():
        if not Loan.objects.filter(pk=loan.pk).delete()[0]:
            raise ToolError(f"Loan {loan.pk} was returned already")
        Book.objects.filter(pk=loan.book_id).update(copies_available=F("copies_available") + 1)
        ctx.claim_answer()
    return {"returned": loan.book.title, "by": loan.borrower}
