"""A new site built as the documentation tells a newcomer: its blocks, the site made and served."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.live import ROOT, free_port, stop_process, wait_for_port

SITE = "newsite"


SHOP_MCP = '''
from mcp_server import Context, mcp

__all__ = ["SITE", "build_site", "doc_block_list", "doc_blocks", "run", "serve", "site_env"]


@mcp.tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@mcp.tool(permission=lambda user: user.is_staff)
def whoami(ctx: Context) -> str:
    """Staff only: who is calling."""
    return ctx.user.get_username()
'''


def doc_block_list(page: str) -> list[tuple[str, str]]:
    """The ``python`` blocks of the documentation page ``docs/<page>.md`` (``"howto/add-to-a-site"``) whose
    first line names a file (``# settings.py``, ``# mysite/settings.py (at the end)``), in order: each as
    that file's name and the block without its first line."""
    text = (ROOT / "docs" / f"{page}.md").read_text()
    blocks: list[tuple[str, str]] = []
    for match in re.finditer(r"^( *)```python\n(.*?)^\1```", text, re.S | re.M):
        code = textwrap.dedent(match.group(2))
        first, _newline, rest = code.partition("\n")
        name = first[2:].split()[0] if first.startswith("# ") and first[2:].strip() else ""
        if name.endswith(".py"):
            blocks.append((name, rest))
    return blocks


def doc_blocks(page: str) -> dict[str, str]:
    """:func:`doc_block_list` by file name (a later block of the same file wins)."""
    return dict(doc_block_list(page))


def site_env(directory: Path) -> dict[str, str]:
    """The environment of a developer's shell: none of the test suite's own settings."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL", "PYTHONPATH"}
        and not k.startswith("MCP_TEST")
    }
    probe = subprocess.run(
        [sys.executable, "-c", "import mcp_server; print(mcp_server.__file__)"],
        cwd=directory,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    installed = Path(probe.stdout.strip()).resolve() if probe.returncode == 0 else None
    if installed != (ROOT / "mcp_server" / "__init__.py").resolve():
        # Not installed (a bare checkout), or installed from another checkout (a git worktree beside an
        # editable install): the source tree under test stands in for pip install.
        env["PYTHONPATH"] = str(ROOT)
    return env


def run(directory: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, *args], cwd=directory, env=env or site_env(directory), capture_output=True, text=True
    )
    assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
    return done.stdout


def build_site(directory: Path, *, protected: bool) -> Path:
    """A fresh project with the documented steps applied (and, if ``protected``, its authentication step)."""
    directory.mkdir(parents=True)
    run(directory, "-m", "django", "startproject", SITE, ".")
    install = doc_blocks("howto/add-to-a-site")
    settings = directory / SITE / "settings.py"
    asgi = directory / SITE / "asgi.py"
    with settings.open("a") as out:
        out.write("\n" + install["settings.py"].replace("mysite", SITE))
    with asgi.open("a") as out:
        out.write("\n" + install["asgi.py"].replace("mysite", SITE))
    # The site's own app, where its handlers live.
    run(directory, "manage.py", "startapp", "shop")
    with settings.open("a") as out:
        out.write('\nINSTALLED_APPS += ["shop"]\n')
    (directory / "shop" / "mcp.py").write_text(SHOP_MCP)
    if protected:
        with settings.open("a") as out:
            out.write("\n" + doc_blocks("howto/authentication")["settings.py"])
    run(directory, "manage.py", "migrate", "-v0")
    run(directory, "manage.py", "check", "--fail-level", "WARNING")  # e.g. mcp_server.W003: routing missing
    return directory


@contextmanager
def serve(directory: Path, kind: str) -> Iterator[str]:
    """Run the site on Daphne (with its access log on) or Uvicorn; yields its MCP endpoint URL."""
    port = free_port()
    if kind == "daphne":
        command = ["-m", "daphne", "--access-log", "-", "-b", "127.0.0.1", "-p", str(port)]
        command.append(f"{SITE}.asgi:application")
    else:
        command = ["-m", "uvicorn", f"{SITE}.asgi:application", "--host", "127.0.0.1", "--port", str(port)]
    log_path = directory / f"{kind}-{port}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, *command], cwd=directory, env=site_env(directory), stdout=log, stderr=log
        )
    try:
        try:
            wait_for_port(port, process)
        except Exception:
            raise RuntimeError(f"{kind} did not start:\n{log_path.read_text()}") from None
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(process)
