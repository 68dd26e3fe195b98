"""The app's ``ready``: the access-token admin is registered only on a site that has the admin; a site's
``mcp.py`` that registers a built-in method fails the start-up."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.apps.registry import Apps

import mcp_server.auth

ROOT = Path(__file__).resolve().parents[2]


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


@pytest.mark.parametrize(("method", "refused"), [("tasks/get", True), ("tasks/list", False)])
def test_a_site_method_named_as_a_built_in_fails_the_start_up(
    tmp_path: Path, method: str, refused: bool
) -> None:
    """An app's ``mcp.py`` with ``@mcp.method("tasks/get")``: ``django.setup()`` (which discovers it) stops
    with an error naming the method, rather than a server whose method would never be called (the built-in
    answers first). ``tasks/list``, a method of no revision, is the site's own."""
    app = tmp_path / "collides"
    app.mkdir()
    (app / "__init__.py").write_text("")
    (app / "mcp.py").write_text(
        f"from mcp_server import mcp\n\n\n@mcp.method({method!r})\ndef mine(params):\n    return {{}}\n"
    )
    (tmp_path / "collides_settings.py").write_text(
        "from tests.settings import *  # noqa: F403\n\nINSTALLED_APPS = [*INSTALLED_APPS, 'collides']\n"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "collides_settings",
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
    }
    script = "import django; django.setup(); from mcp_server import mcp; print(sorted(mcp.methods))"
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    if refused:
        assert out.returncode != 0
        last = out.stderr.strip().splitlines()[-1]
        assert last == (
            "django.core.exceptions.ImproperlyConfigured: "
            f"MCP method {method!r} is built in and cannot be overridden"
        )
    else:
        assert out.returncode == 0, out.stderr
        assert method in out.stdout
