"""The test viewsets as tools on the default server (``drf_books_*``, ``drf_loans_*``, ``drf_authors_*``)."""

from __future__ import annotations

from mcp_server import expose_viewset, mcp

from .api import AuthorViewSet, LoanViewSet, ShelfViewSet

expose_viewset(mcp, ShelfViewSet, name="drf_books")
expose_viewset(mcp, LoanViewSet, name="drf_loans", permission={"destroy": "catalogue.delete_loan"})
expose_viewset(mcp, AuthorViewSet, name="drf_authors")
