"""Django REST framework viewsets as MCP tools: ``expose_viewset(mcp, BookViewSet, name="books")``.

Needs ``djangorestframework`` (the ``drf`` extra: ``pip install "django-mcp-ledger[drf]"``); nothing else in
``mcp_server`` imports it.
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

try:
    import rest_framework  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised by a subprocess without DRF
    raise ImproperlyConfigured(
        "expose_viewset needs Django REST framework: pip install 'django-mcp-ledger[drf]' "
        "(or djangorestframework>=3.15)"
    ) from exc

from .tools import DEFAULT_ANNOTATIONS, expose_viewset

__all__ = ["DEFAULT_ANNOTATIONS", "expose_viewset"]
