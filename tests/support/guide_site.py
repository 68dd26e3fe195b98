"""The site the how-to guides' blocks run in: a new site (:func:`tests.support.new_site.build_site`) with an
app ``library`` holding the models the guides name, and each guide's blocks written into a copy of it as the
page names them (``# library/mcp.py``, ``# settings.py``...), then a probe run there: Django set up, the
system checks run, the guide's tools called in process.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from tests.support.live import ROOT
from tests.support.new_site import SITE, build_site, doc_block_list, doc_blocks, run, site_env

__all__ = ["APPENDED", "build_library_site", "copy_site", "doc_fences", "place_blocks", "probe", "variants"]

MODELS = """
from django.conf import settings
from django.db import models


class Author(models.Model):
    name = models.CharField(max_length=200)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE)

    def __str__(self) -> str:
        return self.name


class Book(models.Model):
    title = models.CharField(max_length=300)
    author = models.ForeignKey(Author, on_delete=models.PROTECT)
    year = models.PositiveIntegerField()
    isbn = models.CharField(max_length=20, unique=True)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE)

    def __str__(self) -> str:
        return self.title


class Loan(models.Model):
    book = models.ForeignKey(Book, on_delete=models.CASCADE)
    borrower = models.CharField(max_length=150)
"""

APPENDED = ("settings.py", "urls.py", "asgi.py")
"""Files a block adds to (the end of the site's own), where others are written whole."""

PROBE_HEAD = '''
import asyncio
import json

import django

django.setup()

from django.core import checks

from mcp_server import mcp
from mcp_server.core.context import Context, SessionState

CHECKS = sorted(m.id for m in checks.run_checks() if m.level >= checks.WARNING and not m.is_silenced())
result = {}


def context(server=mcp, user=None, method="tools/call"):
    return Context(server, SessionState("s", "2025-11-25"), 1, method, {}, peer=None, user=user)


def call(name, arguments, user=None, server=mcp):
    return asyncio.run(server.tools[name].call(arguments, context(server, user)))


def post(method, params=None, path="/mcp", name=None, capabilities=None):
    """A 2026-07-28 request through the site's own ASGI application (ASGI_APPLICATION): its answer."""
    import httpx
    from django.conf import settings
    from django.utils.module_loading import import_string

    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities or {},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**(params or {}), "_meta": meta}}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28"}
    headers.update({"Mcp-Method": method, **({"Mcp-Name": name} if name else {})})

    async def send():
        transport = httpx.ASGITransport(app=import_string(settings.ASGI_APPLICATION))
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            return await http.post(path, json=body, headers=headers)

    answer = asyncio.run(send())
    if answer.headers["content-type"].startswith("text/event-stream"):
        data = [line[5:] for line in answer.text.splitlines() if line.startswith("data:")]
        return json.loads([line for line in data if line.strip()][-1])
    return answer.json()


'''

PROBE_TAIL = '\nprint(json.dumps({"checks": CHECKS, "result": result}, default=str))\n'


def doc_fences(page: str, language: str) -> list[str]:
    """The ``language`` blocks of ``docs/<page>.md``, dedented."""
    text = (ROOT / "docs" / f"{page}.md").read_text()
    pattern = rf"^( *)```{language}\n(.*?)^\1```"
    return [textwrap.dedent(m.group(2)) for m in re.finditer(pattern, text, re.S | re.M)]


def variants(page: str) -> list[list[tuple[str, str]]]:
    """The sites a page's named blocks make: one with all of them, or, when the page shows the same file
    more than once (alternatives: ``library/mcp.py`` with reads, then with writes), one site per version
    of it, each with the page's settings, URL and ASGI blocks."""
    blocks = doc_block_list(page)
    whole = [block for block in blocks if Path(block[0]).name not in APPENDED]
    names = [name for name, _code in whole]
    if len(set(names)) == len(names):
        return [blocks]
    shared = [block for block in blocks if Path(block[0]).name in APPENDED]
    return [[*shared, block] for block in whole]


def build_library_site(directory: Path) -> Path:
    """A new site, plus the app ``library`` with its models migrated."""
    site = build_site(directory, protected=False)
    run(site, "manage.py", "startapp", "library")
    (site / "library" / "models.py").write_text(MODELS)
    with (site / SITE / "settings.py").open("a") as out:
        out.write('\nINSTALLED_APPS += ["library"]\n')
    run(site, "manage.py", "makemigrations", "library", "-v0")
    run(site, "manage.py", "migrate", "-v0")
    return site


def place_blocks(site: Path, blocks: list[tuple[str, str]]) -> None:
    """Write ``blocks`` into ``site`` as their first lines name them (``mysite`` is the site's package).

    Settings, URL and ASGI blocks go at the end of the site's own file; each ``MCP_SERVER = {...}`` of a
    page adds its keys to the ones before it (a page shows each setting on its own). An ASGI block that
    makes ``application = mcp_application(...)`` itself stands in for the installation's line. The
    installation's own blocks (``howto/add-to-a-site``) are in every site already."""
    install = doc_blocks("howto/add-to-a-site")
    installed = {install["settings.py"], install["asgi.py"]}
    for name, block in blocks:
        if block in installed:
            continue  # the installation's own settings and asgi.py lines: build_site put them in
        code = block.replace("mysite", SITE)
        path = Path(name)
        if path.name not in APPENDED:
            target = site / str(path).replace("mysite", SITE)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(code)
            continue
        target = site / SITE / path.name
        text = target.read_text()
        if path.name == "asgi.py" and "application = mcp_application(" in code:
            lines = text.splitlines(keepends=True)
            text = "".join(line for line in lines if not line.startswith("application = mcp_application("))
        if path.name == "settings.py" and re.search(r"^MCP_SERVER = ", code, re.M):
            code += '_GUIDE_MCP_SERVER = {**globals().get("_GUIDE_MCP_SERVER", {}), **MCP_SERVER}\n'
            code += "MCP_SERVER = _GUIDE_MCP_SERVER\n"
        target.write_text(text + "\n" + code)


def probe(site: Path, code: str, env: dict[str, str] | None = None) -> tuple[dict[str, Any], str]:
    """Run ``code`` in ``site`` after ``django.setup()`` and the system checks (helpers: ``call(name,
    arguments, user=None, server=mcp)``, a tool called in process; ``post(method, params, path=, name=,
    capabilities=)``, a 2026-07-28 request through the site's ASGI application; it fills the dict
    ``result``). Returns
    ``{"checks": [ids of the warnings and errors], "result": result}`` and what it wrote to stderr."""
    (site / "probe.py").write_text(PROBE_HEAD + textwrap.dedent(code) + PROBE_TAIL)
    done = subprocess.run(
        [sys.executable, "probe.py"],
        cwd=site,
        env={**site_env(site), "DJANGO_SETTINGS_MODULE": f"{SITE}.settings", **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"{site.name}: {done.stdout}\n{done.stderr}"
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found, done.stderr


def copy_site(base: Path, directory: Path) -> Path:
    """A copy of the built site (its SQLite database too), for one guide's blocks."""
    shutil.copytree(base, directory, ignore=shutil.ignore_patterns("__pycache__", "*.log"))
    return directory
