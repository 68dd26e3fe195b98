"""The documentation's code, checked against the code it names, so that a rename breaks a test and not a
reader: every ``python`` block of the tutorial, the how-to guides and the README parses; every
``mcp_server`` name it imports, every import path it writes as a string, every ``MCP_SERVER`` key it sets
exists; and every page (and the README; not the changelog, which is history) names only check ids,
settings and management commands that exist.

(Every block of the tutorial and the how-to guides is also run: ``tests/end_to_end/test_tutorial.py``,
``tests/end_to_end/test_new_site*.py``, ``tests/docs/test_guide_blocks.py``; ``tests/docs/test_blocks_run.py``
fails for one that none of them runs.)
"""

from __future__ import annotations

import ast
import re
import textwrap
from pathlib import Path

import pytest

from mcp_server.conf import DEFAULTS
from tests.support.live import ROOT

DOCS = ROOT / "docs"
PAGES = sorted(path for path in DOCS.rglob("*.md") if "_build" not in path.parts)
GUIDES = [path for path in PAGES if path.relative_to(DOCS).parts[0] in ("tutorial", "howto")]
FRONT = [ROOT / "README.md"]  # not CHANGELOG.md: it names what was, moved names too
IMPORT_PATH = re.compile(r"mcp_server(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
COMMANDS = {path.stem for path in (ROOT / "mcp_server").rglob("management/commands/mcp_*.py")}
STRINGS = {
    node.value
    for path in (ROOT / "mcp_server").rglob("*.py")
    for node in ast.walk(ast.parse(path.read_text()))
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("mcp_server.")
}
"""Dotted strings the package itself uses (a signing salt, a logger's name): named as is, not imported."""
CHECK_IDS = {
    match
    for path in (ROOT / "mcp_server").rglob("*.py")
    for match in re.findall(r"[\"'](mcp_server\.[EW]\d{3})[\"']", path.read_text())
}


def python_blocks(page: Path) -> list[str]:
    text = page.read_text()
    return [
        textwrap.dedent(m.group(2)) for m in re.finditer(r"^( *)```python\n(.*?)^\1```", text, re.S | re.M)
    ]


def source(module: str) -> Path | None:
    """The file of an ``mcp_server`` module (not imported: some need their app installed), if it exists."""
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def defines(module: str, name: str) -> bool:
    """Whether ``module`` defines (or imports, or has a submodule) ``name``."""
    if module == "mcp_server":
        import mcp_server

        if name in mcp_server.__all__:
            return True
    found = source(module)
    if found is None:
        return False
    if source(f"{module}.{name}") is not None:
        return True
    for node in ast.walk(ast.parse(found.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name == name:
            return True
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
        if isinstance(node, ast.ImportFrom | ast.Import) and any(
            (a.asname or a.name) == name for a in node.names
        ):
            return True
        if moved_name(node, name):
            return True
    return False


def moved_name(node: ast.AST, name: str) -> bool:
    """A name a module answers through ``core/moved.py`` (``moved_names(..., {"Ledger": ...})``)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        return False
    if node.func.id not in {"moved_names", "lazy_exports"}:
        return False
    return any(
        isinstance(arg, ast.Dict) and any(isinstance(k, ast.Constant) and k.value == name for k in arg.keys)
        for arg in node.args
    )


def resolves(path: str) -> bool:
    """``mcp_server.a.b.Name``: a module, or a name a module defines."""
    if source(path) is not None:
        return True
    module, _dot, name = path.rpartition(".")
    return defines(module, name)


@pytest.mark.parametrize("page", [*GUIDES, ROOT / "README.md"], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_python_block_parses_and_names_what_exists(page: Path) -> None:
    for code in python_blocks(page):
        tree = ast.parse(code)  # a SyntaxError names the block's line
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mcp_server"):
                for alias in node.names:
                    assert defines(str(node.module), alias.name), f"from {node.module} import {alias.name}"
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("mcp_server"):
                        assert source(alias.name), alias.name
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for path in IMPORT_PATH.findall(node.value):
                    if not re.fullmatch(r"mcp_server\.[EW]\d{3}", path):
                        assert resolves(path), path
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "MCP_SERVER" for t in node.targets
            ):
                assert isinstance(node.value, ast.Dict)
                keys = {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
                assert keys <= set(DEFAULTS), keys - set(DEFAULTS)


@pytest.mark.parametrize("page", [*PAGES, *FRONT], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_page_names_real_settings_checks_and_commands(page: Path) -> None:
    text = page.read_text()
    for key in re.findall(r"MCP_SERVER\[[\"']([A-Z_]+)[\"']\]", text):
        assert key in DEFAULTS, key
    for ident in re.findall(r"mcp_server\.[EW]\d{3}", text):
        assert ident in CHECK_IDS, ident
    for command in re.findall(r"manage\.py (mcp_[a-z_]+)", text):
        assert command in COMMANDS, command
    for path in re.findall(r"`(mcp_server(?:\.[A-Za-z_][A-Za-z0-9_]*)+)`", text):
        if not re.fullmatch(r"mcp_server\.[EW]\d{3}", path) and path not in STRINGS:
            owner = path.rsplit(".", 1)[0]  # mcp_server.x.Class.method: the class must exist
            assert resolves(path) or (source(owner) is None and resolves(owner)), path
