"""Sphinx configuration of the documentation site (``scripts/docs`` builds it into ``docs/_build/html``)."""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path[:0] = [str(ROOT), str(DOCS / "_ext")]

# autodoc and the generated reference import the package: a settings module of their own (no database is
# opened, no service is needed; docs/_ext/docs_settings.py).
os.environ["DJANGO_SETTINGS_MODULE"] = "docs_settings"
import django  # noqa: E402

django.setup()

project = "django-mcp-ledger"
author = "django-mcp-ledger contributors"
release = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
version = release
copyright = "django-mcp-ledger contributors"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "mcp_reference",  # docs/_ext/mcp_reference.py: settings, checks and commands, generated from the code
]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 4
suppress_warnings: list[str] = []

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": False}

html_theme = "furo"
html_title = f"django-mcp-ledger {release}"
html_static_path: list[str] = []
smartquotes = False  # options and code-like text keep their "--" and quotes
