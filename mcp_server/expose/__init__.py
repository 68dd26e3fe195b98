"""The ways a site exposes what it has as MCP tools.

- ``models``: ``expose_model``, a model's rows as ``<name>_list`` and ``<name>_get``, and with ``writes=`` its
  ``<name>_create``, ``<name>_update`` and ``<name>_delete`` (``writes``);
- ``forms``: ``expose_form``, a ``Form`` or ``ModelForm`` as one tool's input;
- ``viewsets``: ``expose_viewset``, a Django REST framework viewset's routes (imports DRF, the ``drf`` extra);
- ``fields`` and ``schema``: what they share, the Python types of Django's fields and the tool signatures
  the registry reads their schemas from.

The names are imported on first use, so that importing ``mcp_server.expose.models`` never imports DRF.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.moved import lazy_exports

__all__ = ["expose_form", "expose_model", "expose_viewset"]

if TYPE_CHECKING:
    from .forms import expose_form
    from .models import expose_model
    from .viewsets import expose_viewset

_LAZY = {
    "expose_form": "mcp_server.expose.forms",
    "expose_model": "mcp_server.expose.models",
    "expose_viewset": "mcp_server.expose.viewsets",
}


__getattr__ = lazy_exports("mcp_server.expose", _LAZY)
