"""Reference pages generated from the code, so that they cannot drift from it.

- ``{mcp-settings}``: every ``MCP_SERVER`` key, its default and type from ``mcp_server/conf.py``
  (``DEFAULTS`` and ``MCPSettings``), its meaning from ``docs/reference/settings.toml`` or, when that has no
  line for it, from the field's docstring in ``MCPSettings``.
- ``{mcp-checks}``: every system check id found in the code (each ``"mcp_server.E0xx"``/``"W0xx"`` string
  under ``mcp_server/``), the module that raises it and the hint it gives, its meaning from
  ``docs/reference/checks.toml``.
- ``{mcp-commands}``: every management command of the package and each of its options, from its argparse
  parser.
- ``{mcp-public-api}``: autodoc of every name in ``mcp_server.__all__``.

A setting or check id without a meaning, or a meaning of one that does not exist, is a build error.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import itertools
import re
import tomllib
from importlib import import_module
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util.docutils import SphinxDirective

__all__ = ["check_ids", "command_markdown", "setting_rows", "setup"]

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "mcp_server"
REFERENCE = ROOT / "docs" / "reference"
CHECK_ID = re.compile(r"mcp_server\.([EW]\d{3})")
DJANGO_OPTIONS = {
    "--version",
    "--verbosity",
    "--settings",
    "--pythonpath",
    "--traceback",
    "--no-color",
    "--force-color",
    "--skip-checks",
    "--help",
}
"""Options every Django command has (Django's own documentation describes them)."""


def cell(text: str) -> str:
    """``text`` as one cell of a Markdown table."""
    return " ".join(text.split()).replace("|", "\\|")


def plain(text: str) -> str:
    """Text from the code (a help string, a hint) escaped, so that Markdown shows it as it is."""
    return re.sub(r"([\\`*_\[\]<>#~])", r"\\\1", text)


def code(value: str) -> str:
    """``value`` as inline code, whatever backticks it holds."""
    fence = "``" if "`" in value else "`"
    return f"{fence} {value} {fence}" if fence == "``" else f"`{value}`"


def field_docstrings() -> dict[str, str]:
    """The attribute docstrings of ``MCPSettings`` (a string right below a field)."""
    tree = ast.parse((PACKAGE / "conf.py").read_text())
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "MCPSettings":
            body = node.body
            for here, after in itertools.pairwise(body):
                if not (isinstance(here, ast.AnnAssign) and isinstance(here.target, ast.Name)):
                    continue
                if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
                    found[here.target.id] = str(after.value.value).replace("``", "`")
    return found


def setting_rows() -> list[tuple[str, str, str, str]]:
    """``(key, default, type, meaning)`` of every setting, in the order of ``DEFAULTS``."""
    from mcp_server.conf import DEFAULTS, MCPSettings

    meanings = tomllib.loads((REFERENCE / "settings.toml").read_text())
    unknown = sorted(set(meanings) - set(DEFAULTS))
    if unknown:
        raise ExtensionError(f"docs/reference/settings.toml describes no setting of that name: {unknown}")
    docstrings = field_docstrings()
    annotations = MCPSettings.__annotations__
    rows = []
    for key, default in DEFAULTS.items():
        meaning = meanings.get(key) or docstrings.get(key)
        if not meaning:
            raise ExtensionError(
                f"MCP_SERVER[{key!r}] has no meaning: add it to docs/reference/settings.toml "
                "or give the field a docstring in mcp_server/conf.py (MCPSettings)"
            )
        rows.append((key, repr(default), str(annotations.get(key, "")), meaning))
    return rows


def source_text(node: ast.expr) -> str:
    """A message or hint as the reader sees it: an f-string's fields shown as ``…``."""
    if isinstance(node, ast.Constant):
        return str(node.value)
    if isinstance(node, ast.JoinedStr):
        return "".join(source_text(part) if isinstance(part, ast.Constant) else "…" for part in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return source_text(node.left) + source_text(node.right)
    return "…"


def check_ids() -> dict[str, dict[str, Any]]:
    """Every check id in the package: the modules that name it and the hints its messages give."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                match = CHECK_ID.fullmatch(node.value)
                if match:
                    entry = found.setdefault(match.group(1), {"modules": set(), "hints": set()})
                    entry["modules"].add(module.removesuffix(".__init__"))
            if isinstance(node, ast.Call):
                keywords = {k.arg: k.value for k in node.keywords}
                ident, hint = keywords.get("id"), keywords.get("hint")
                if isinstance(ident, ast.Constant) and hint is not None:
                    match = CHECK_ID.fullmatch(str(ident.value))
                    if match:
                        found.setdefault(match.group(1), {"modules": set(), "hints": set()})
                        found[match.group(1)]["hints"].add(source_text(hint))
    return found


def check_rows() -> list[tuple[str, str, str, str]]:
    """``(id, modules, meaning, hints)`` of every check id, errors first, each in id order."""
    meanings = tomllib.loads((REFERENCE / "checks.toml").read_text())
    ids = check_ids()
    unknown = sorted(set(meanings) - set(ids))
    if unknown:
        raise ExtensionError(f"docs/reference/checks.toml describes check ids no code raises: {unknown}")
    missing = sorted(set(ids) - set(meanings))
    if missing:
        raise ExtensionError(f"check ids without a line in docs/reference/checks.toml: {missing}")
    rows = []
    for ident in sorted(ids, key=lambda i: (i[0], i[1:])):
        modules = ", ".join(code(m) for m in sorted(ids[ident]["modules"]))
        hints = plain(" ".join(sorted(ids[ident]["hints"])))
        rows.append((f"mcp_server.{ident}", modules, meanings[ident], hints))
    return rows


def command_names() -> list[tuple[str, str]]:
    """``(app module, command)`` of every management command the package ships."""
    found = []
    for path in sorted(PACKAGE.rglob("management/commands/*.py")):
        if path.name != "__init__.py":
            app = ".".join(path.relative_to(ROOT).parts[:-3])
            found.append((app, path.stem))
    return found


def option_lines(parser: argparse.ArgumentParser) -> list[str]:
    """A Markdown table of a parser's own arguments (Django's common options left out)."""
    lines = ["| Argument | Default | Meaning |", "| --- | --- | --- |"]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) or set(action.option_strings) & DJANGO_OPTIONS:
            continue
        name = ", ".join(action.option_strings) or action.dest
        if action.option_strings and action.nargs != 0:
            metavar = action.metavar if isinstance(action.metavar, str) else action.dest.upper()
            name += " " + metavar
        default = "" if action.default in (None, argparse.SUPPRESS, False) else repr(action.default)
        lines.append(f"| {code(name)} | {cell(default)} | {cell(plain(action.help or ''))} |")
    return lines if len(lines) > 2 else []


def command_markdown(app: str, name: str) -> list[str]:
    """The reference section of one command: what it does, its usage, its options, its subcommands'."""
    command = import_module(f"{app}.management.commands.{name}").Command()
    parser = command.create_parser("manage.py", name)
    lines = [f"## `{name}`", "", f"From `{app}`. {cell(plain(str(command.help)))}", ""]
    lines += ["```text", parser.format_usage().strip(), "```", ""]
    lines += [*option_lines(parser), ""]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for sub, subparser in action.choices.items():
                lines += [f"### `{name} {sub}`", "", cell(plain(helps.get(sub) or "")), ""]
                lines += ["```text", subparser.format_usage().strip(), "```", ""]
                lines += [*option_lines(subparser), ""]
    return lines


class MarkdownDirective(SphinxDirective):
    """A directive whose content is Markdown made from the code, parsed as the page around it."""

    def markdown(self) -> list[str]:
        raise NotImplementedError

    def run(self) -> list[nodes.Node]:
        self.env.note_dependency(str(PACKAGE / "conf.py"))
        for name in ("settings.toml", "checks.toml"):
            self.env.note_dependency(str(REFERENCE / name))
        text = "\n".join(self.markdown())
        return self.parse_text_to_nodes(text, allow_section_headings=self.name != "mcp-checks")


class SettingsTable(MarkdownDirective):
    """One section per setting, as Django's settings reference has: its default, its type, its meaning."""

    def markdown(self) -> list[str]:
        lines: list[str] = []
        for key, default, kind, meaning in setting_rows():
            lines += [f"## `{key}`", "", f"Default: {code(default)} · type: {code(kind)}", "", meaning, ""]
        return lines


class ChecksTable(MarkdownDirective):
    """A definition list: each id, its level and where it is raised; what is wrong and the hint it prints."""

    def markdown(self) -> list[str]:
        lines: list[str] = []
        for ident, modules, meaning, hints in check_rows():
            level = "error" if ident.startswith("mcp_server.E") else "warning"
            lines += [f"{code(ident)} ({level}, {modules})", f": {cell(meaning)}"]
            if hints:
                lines += ["", f"  *Hint:* {hints}"]
            lines.append("")
        return lines


class PublicApi(MarkdownDirective):
    """autodoc of every name in ``mcp_server.__all__``: a name added there is documented, none is left out."""

    def markdown(self) -> list[str]:
        import mcp_server

        rst: list[str] = []
        for name in mcp_server.__all__:
            obj = getattr(mcp_server, name)
            if inspect.isclass(obj):
                rst += [f".. autoclass:: mcp_server.{name}", "   :members:", ""]
            elif inspect.isfunction(obj):
                rst += [f".. autofunction:: mcp_server.{name}", ""]
            else:
                rst += [f".. autodata:: mcp_server.{name}", "   :no-value:", ""]
        return ["```{eval-rst}", *rst, "```"]


class CommandsReference(MarkdownDirective):
    def markdown(self) -> list[str]:
        lines: list[str] = []
        for app, name in command_names():
            lines += command_markdown(app, name)
        return lines


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("mcp-settings", SettingsTable)
    app.add_directive("mcp-checks", ChecksTable)
    app.add_directive("mcp-commands", CommandsReference)
    app.add_directive("mcp-public-api", PublicApi)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
