"""The tutorial (``docs/tutorial/index.md``), followed as written: its code blocks make the site, its clients
print what the page says they print, and the sign-in step makes the endpoint refuse with the challenge the
page shows. Its installation and sign-in blocks are the how-to guides' own, so neither page can drift.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.support.live import ROOT, free_port, stop_process, wait_for_port
from tests.support.new_site import doc_block_list, doc_blocks, run, site_env

PAGE = "tutorial/index"
TEXT = (ROOT / "docs" / f"{PAGE}.md").read_text()
BOOKS = (
    "from library.models import Book; Book.objects.create(title='Dune', year=1965); "
    "Book.objects.create(title='Dune Messiah', year=1969)"
)


def tutorial_blocks() -> dict[str, list[str]]:
    """The page's blocks by file, in order (``mysite/settings.py`` has two: installing, then signing in)."""
    found: dict[str, list[str]] = {}
    for name, code in doc_block_list(PAGE):
        found.setdefault(name, []).append(code)
    return found


def test_the_tutorial_uses_the_how_to_guides_blocks() -> None:
    blocks = tutorial_blocks()
    install, oauth = doc_blocks("howto/add-to-a-site"), doc_blocks("howto/oauth")
    assert blocks["mysite/settings.py"][0] == install["settings.py"] + 'INSTALLED_APPS += ["library"]\n'
    assert blocks["mysite/asgi.py"] == [install["asgi.py"]]
    assert blocks["mysite/settings.py"][1] == oauth["settings.py"]
    assert blocks["mysite/urls.py"] == [oauth["urls.py"]]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Steps 1 to 3: ``startproject``, the app, the settings, the model and the tool, two books."""
    directory = tmp_path_factory.mktemp("tutorial")
    blocks = tutorial_blocks()
    run(directory, "-m", "django", "startproject", "mysite", ".")
    run(directory, "manage.py", "startapp", "library")
    with (directory / "mysite" / "settings.py").open("a") as out:
        out.write("\n" + blocks["mysite/settings.py"][0])
    with (directory / "mysite" / "asgi.py").open("a") as out:
        out.write("\n" + blocks["mysite/asgi.py"][0])
    for name in ("library/models.py", "library/mcp.py", "client.py", "stdio_client.py"):
        (directory / name).write_text(blocks[name][0])
    assert "+ Create model Book" in run(directory, "manage.py", "makemigrations", "library")
    run(directory, "manage.py", "migrate", "-v0")
    run(directory, "manage.py", "shell", "-c", BOOKS)
    assert "System check identified no issues (0 silenced)." in run(directory, "manage.py", "check")
    return directory


@contextmanager
def daphne(directory: Path) -> Iterator[int]:
    port = free_port()
    log_path = directory / f"daphne-{port}.log"
    command = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "mysite.asgi:application"]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, cwd=directory, env=site_env(directory), stdout=log, stderr=log)
    try:
        try:
            wait_for_port(port, process)
        except Exception:
            raise RuntimeError(f"daphne did not start:\n{log_path.read_text()}") from None
        yield port
    finally:
        stop_process(process)


def test_step_4_the_client_prints_what_the_page_shows(site: Path) -> None:
    with daphne(site) as port:
        client = (site / "client.py").read_text().replace("127.0.0.1:8000", f"127.0.0.1:{port}")
        (site / "client_here.py").write_text(client)
        printed = run(site, "client_here.py")
    assert f"$ python client.py\n{printed}" in TEXT


def test_step_5_the_stdio_client_prints_what_the_page_shows(site: Path) -> None:
    printed = run(site, "stdio_client.py")
    assert f"$ python stdio_client.py\n{printed}" in TEXT


def test_step_6_the_endpoint_asks_the_client_to_sign_in(site: Path) -> None:
    blocks = tutorial_blocks()
    with (site / "mysite" / "settings.py").open("a") as out:
        out.write("\n" + blocks["mysite/settings.py"][1])
    with (site / "mysite" / "urls.py").open("a") as out:
        out.write("\n" + blocks["mysite/urls.py"][0])
    run(site, "manage.py", "migrate", "-v0")
    assert "System check identified no issues (0 silenced)." in run(site, "manage.py", "check")
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "curl", "version": "1"},
        },
    }
    with daphne(site) as port:
        base = f"http://127.0.0.1:{port}"
        headers = {"Accept": "application/json, text/event-stream"}
        refused = httpx.post(f"{base}/mcp", json=body, headers=headers, timeout=30)
        metadata = httpx.get(f"{base}/.well-known/oauth-protected-resource/mcp", timeout=30)
    assert refused.status_code == 401
    challenge = refused.headers["WWW-Authenticate"].replace(base, "http://127.0.0.1:8000")
    assert f"WWW-Authenticate: {challenge}\n\n{refused.text}\n" in TEXT
    assert metadata.text.replace(base, "http://127.0.0.1:8000") + "\n" in TEXT
