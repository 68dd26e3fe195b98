"""Viewsets of the ``expose_viewset`` tests (tests/end_to_end/registry/test_viewset_tools.py,
tests/registry/test_viewset_schema.py).

- ``ShelfViewSet`` (books): anyone signed in reads; :class:`MayEditCatalogue` lets only users with
  ``catalogue.change_book`` write; a nested, writable author; a write-only choice with a default; pages of 3;
  search and ordering; a ``restock`` action (POST, detail) with its own serializer, and a ``withdraw``
  action (POST, detail) without one, which reads no body.
- ``LoanViewSet``: :meth:`get_queryset` shows a user their own loans and the library's; the object-level
  :class:`OwnLoansOnly` lets only the borrower (or staff) change or delete a loan; cursor pagination.
- ``AuthorViewSet``: read-only, throttled to 3 calls a minute per user.
"""

from __future__ import annotations

import datetime
from typing import Any

from django.db.models import Q, QuerySet
from rest_framework import filters, pagination, permissions, serializers, throttling, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from project.catalogue.models import Author, Book, Loan


class AuthorSerializer(serializers.ModelSerializer):
    class Meta:
        model = Author
        fields = ["id", "name"]
        extra_kwargs: dict[str, dict[str, Any]] = {
            "name": {"validators": []}
        }  # an existing author is reused by name

    def validate_name(self, value: str) -> str:
        if not value[:1].isupper():
            raise serializers.ValidationError("Start the name with a capital letter.")
        return value


class ShelfSerializer(serializers.ModelSerializer):
    author = AuthorSerializer()
    cover = serializers.ChoiceField(
        choices=[("paper", "Paperback"), ("hard", "Hardcover")], write_only=True, default="paper"
    )
    added_by = serializers.SerializerMethodField()

    class Meta:
        model = Book
        fields = ["id", "title", "author", "year", "isbn", "summary", "copies_available", "cover", "added_by"]
        read_only_fields = ["copies_available"]

    def get_added_by(self, book: Book) -> str | None:
        request = self.context.get("request")
        return request.user.get_username() if request is not None else None

    def validate_year(self, value: int) -> int:
        if value > datetime.date.today().year:
            raise serializers.ValidationError("A book from the future?")
        return value

    def create(self, validated: dict[str, Any]) -> Book:
        validated.pop("cover")
        author, _created = Author.objects.get_or_create(**validated.pop("author"))
        return Book.objects.create(author=author, **validated)

    def update(self, book: Book, validated: dict[str, Any]) -> Book:
        validated.pop("cover", None)
        if "author" in validated:
            book.author, _created = Author.objects.get_or_create(**validated.pop("author"))
        for name, value in validated.items():
            setattr(book, name, value)
        book.save()
        return book


class RestockSerializer(serializers.Serializer):
    copies = serializers.IntegerField(min_value=1, max_value=10)


class MayEditCatalogue(permissions.BasePermission):
    """Signed-in users read; only those with ``catalogue.change_book`` write."""

    message = "Only catalogue editors may change books."

    def has_permission(self, request: Request, view: Any) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        return request.method in permissions.SAFE_METHODS or request.user.has_perm("catalogue.change_book")


class ShelfPages(pagination.PageNumberPagination):
    page_size = 3


class ShelfViewSet(viewsets.ModelViewSet):
    queryset = Book.objects.select_related("author")
    serializer_class = ShelfSerializer
    permission_classes = [MayEditCatalogue]
    pagination_class = ShelfPages
    filter_backends = [filters.SearchFilter, filters.OrderingFilter]
    search_fields = ["title", "author__name"]
    ordering_fields = ["title", "year"]
    ordering = ["title"]

    @action(detail=True, methods=["post"], serializer_class=RestockSerializer)
    def restock(self, request: Request, pk: str | None = None) -> Response:
        """Add copies of a book to the shelf."""
        book = self.get_object()
        serializer = RestockSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        book.copies_available += serializer.validated_data["copies"]
        book.save(update_fields=["copies_available"])
        return Response({"id": book.pk, "copies_available": book.copies_available})

    @action(detail=True, methods=["post"])
    def withdraw(self, request: Request, pk: str | None = None) -> Response:
        """Take every copy of a book off the shelf."""
        book = self.get_object()
        book.copies_available = 0
        book.save(update_fields=["copies_available"])
        return Response({"id": book.pk, "copies_available": 0})


class LoanSerializer(serializers.ModelSerializer):
    book_title = serializers.CharField(source="book.title", read_only=True)

    class Meta:
        model = Loan
        fields = ["id", "book", "book_title", "borrower", "created"]
        read_only_fields = ["borrower", "created"]


class OwnLoansOnly(permissions.IsAuthenticated):
    """Signed-in users only; a loan is changed or deleted by its borrower or staff."""

    message = "Only the borrower may change this loan."

    def has_object_permission(self, request: Request, view: Any, obj: Any) -> bool:
        if request.method in permissions.SAFE_METHODS:
            return True
        return bool(request.user.is_staff or obj.borrower == request.user.get_username())


class LoanPages(pagination.CursorPagination):
    page_size = 2
    ordering = "id"


class LoanViewSet(viewsets.ModelViewSet):
    serializer_class = LoanSerializer
    permission_classes = [OwnLoansOnly]
    pagination_class = LoanPages
    queryset = Loan.objects.select_related("book")

    def get_queryset(self) -> QuerySet[Loan]:
        user = self.request.user
        loans = super().get_queryset()
        if user.is_staff:
            return loans
        return loans.filter(Q(borrower=user.get_username()) | Q(borrower="library"))

    def perform_create(self, serializer: Any) -> None:
        serializer.save(borrower=self.request.user.get_username())


class FewCallsThrottle(throttling.UserRateThrottle):
    rate = "3/min"


class AuthorViewSet(viewsets.ReadOnlyModelViewSet):
    queryset = Author.objects.order_by("pk")
    serializer_class = AuthorSerializer
    permission_classes = [permissions.IsAuthenticated]
    throttle_classes = [FewCallsThrottle]
