"""The app's ``ready``: the access-token admin is registered only on a site that has the admin."""

from __future__ import annotations

import sys

import pytest
from django.apps.registry import Apps

import mcp_server.auth


def test_a_site_without_the_admin_gets_no_token_admin(monkeypatch: pytest.MonkeyPatch) -> None:
    # Importing ``mcp_server.auth.admin`` registers ``AccessToken`` with ``admin.site``; forget the module
    # (and the package attribute) so that an import would run it again: it would fail (already registered)
    # or show in ``sys.modules``.
    monkeypatch.delitem(sys.modules, "mcp_server.auth.admin")
    monkeypatch.delattr(mcp_server.auth, "admin")
    site = Apps(installed_apps=["django.contrib.contenttypes", "django.contrib.auth", "mcp_server"])
    assert site.get_app_config("mcp_server").verbose_name == "MCP server"
    assert not site.is_installed("django.contrib.admin")
    assert "mcp_server.auth.admin" not in sys.modules
