"""The catalogue's REST API (Django REST framework), served at ``/api/`` and, the same viewset, as MCP tools.

``project/catalogue/mcp.py`` exposes :class:`BookViewSet` with ``expose_viewset``: the tools and the HTTP API
share one set of rules (permissions, throttles, pagination, search, validation).
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import F, QuerySet
from rest_framework import filters, pagination, permissions, serializers, throttling, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from .models import Author, Book, Loan

__all__ = ["AuthorSerializer", "BookSerializer", "BookViewSet", "ReservationSerializer"]


class AuthorSerializer(serializers.ModelSerializer):
    class Meta:
        model = Author
        fields = ["id", "name"]


class BookSerializer(serializers.ModelSerializer):
    """A book with its author nested (read), set by the author's id (write)."""

    author = AuthorSerializer(read_only=True)
    author_id = serializers.PrimaryKeyRelatedField(
        queryset=Author.objects.all(), source="author", write_only=True
    )

    class Meta:
        model = Book
        fields = ["id", "title", "author", "author_id", "year", "isbn", "summary", "copies_available"]
        read_only_fields = ["copies_available"]


class ReservationSerializer(serializers.Serializer):
    borrower = serializers.CharField(max_length=200)


class CataloguePages(pagination.PageNumberPagination):
    page_size = 5


class CatalogueThrottle(throttling.AnonRateThrottle):
    rate = "120/min"


class IsStaffOrReadOnly(permissions.BasePermission):
    """Anyone may read; only staff may add, change, delete or reserve books."""

    message = "Only library staff may change the catalogue."

    def has_permission(self, request: Request, view: Any) -> bool:
        return request.method in permissions.SAFE_METHODS or bool(request.user and request.user.is_staff)


class BookViewSet(viewsets.ModelViewSet):
    """The catalogue's books."""

    queryset = Book.objects.select_related("author")
    serializer_class = BookSerializer
    permission_classes = [IsStaffOrReadOnly]
    throttle_classes = [CatalogueThrottle]
    pagination_class = CataloguePages
    filter_backends = [filters.SearchFilter, filters.OrderingFilter]
    search_fields = ["title", "author__name"]
    ordering_fields = ["title", "year"]

    def get_queryset(self) -> QuerySet[Book]:
        return super().get_queryset().order_by("title", "pk")

    @action(detail=True, methods=["post"], serializer_class=ReservationSerializer)
    def reserve(self, request: Request, pk: str | None = None) -> Response:
        """Reserve one copy of the book for a borrower."""
        book = self.get_object()
        serializer = ReservationSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        with transaction.atomic():
            updated = Book.objects.filter(pk=book.pk, copies_available__gt=0).update(
                copies_available=F("copies_available") - 1
            )
            if not updated:
                raise serializers.ValidationError({"copies_available": "No copy left."})
            Loan.objects.create(book=book, borrower=serializer.validated_data["borrower"])
        book.refresh_from_db()
        return Response(BookSerializer(book, context=self.get_serializer_context()).data)
