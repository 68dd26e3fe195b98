"""The official conformance suite's ``authorization`` command against the demo's authorization server, with
the person's approval scripted.

``@modelcontextprotocol/conformance`` 0.2.0-alpha.12 runs two authorization-server scenarios in order:

- ``authorization-server-metadata-endpoint`` fetches ``<issuer>/.well-known/oauth-authorization-server``
  and checks its status, content type, ``issuer`` (equal to ``--url``), endpoints, ``response_types`` and
  ``S256``; a second check *warns* when ``client_id_metadata_document_supported`` is not ``true``.
- ``authorization-code-grant`` needs a registered client (``--client-id``; public here, so it
  authenticates with ``none``) whose redirect URI is ``http://127.0.0.1:<port>/callback``. It prints an
  authorize URL (PKCE S256, ``state``, ``resource``), listens on that port and waits up to 5 minutes for a
  browser to come back; then it checks ``state``, ``code``, ``iss``, exchanges the code and checks the token
  response (JSON, ``Cache-Control: no-store``, ``access_token``, ``token_type``).

:func:`run_authorization` registers the client by Dynamic Client Registration, runs the command, and plays
the person when the URL appears: the authorize URL sends it to the site's login, it signs in, gets the
consent page, presses Allow, and follows the redirect to the suite's callback. Each check the suite writes
to ``<outdir>/authorization-server-<scenario>-<timestamp>/checks.json`` is counted
(:func:`scripts.conformance_report.read_results`).

``python scripts/conformance_authorization.py [-o DIR]`` (``scripts/conformance --authorization``) does the
same against a fresh demo site; ``tests/end_to_end/test_conformance.py`` runs it in the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import httpx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make the repository importable
    sys.path.insert(0, str(ROOT))

from scripts.conformance_report import ScenarioCounts, ScenarioTotals, read_results, suite_paths  # noqa: E402
from tests.support.live import LiveServer, free_port  # noqa: E402
from tests.support.oauth import PASSWORD, hidden_fields, start_oauth_server  # noqa: E402

__all__ = [
    "ALLOWED_WARNINGS",
    "SCENARIOS",
    "SUITE_VERSION",
    "AuthorizationRun",
    "allowed_warnings",
    "main",
    "run_authorization",
]

SUITE_VERSION = "0.2.0-alpha.12"
SCENARIOS = ("authorization-server-metadata-endpoint", "authorization-code-grant")
"""The scenarios the ``authorization`` command runs, in its order (the second needs the first's metadata)."""

CIMD_CHECK = "authorization-server-metadata-endpoint:authorization-server-metadata-cimd"
ALLOWED_WARNINGS = {
    CIMD_CHECK: "the metadata does not advertise client_id_metadata_document_supported while Client ID "
    "Metadata Documents are not offered (the check warns, it does not fail)",
}
"""``"scenario:check-id"`` warnings tolerated, with the reason; see :func:`allowed_warnings`."""

WAIT = 120.0
"""Seconds to wait for each step of the suite (its own wait for the browser is 5 minutes)."""


@dataclass
class AuthorizationRun(ScenarioTotals):
    """What one run of the ``authorization`` command came to."""

    scenarios: list[ScenarioCounts]
    output: str
    """Everything the command printed."""
    returncode: int
    metadata: dict[str, Any]
    """The site's RFC 8414 metadata, as the suite saw it."""
    callback: str = ""
    """The redirect the person's browser followed back to the suite."""
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> int:
        return sum(s.passed for s in self.scenarios)

    @property
    def ok(self) -> bool:
        """Both scenarios reported, no failure, and exactly the warnings :func:`allowed_warnings` expects."""
        names = [s.scenario for s in self.scenarios]
        expected = set(allowed_warnings(self.metadata))
        return (
            self.returncode == 0
            and sorted(names) == sorted(SCENARIOS)
            and not self.failures
            and set(self.warnings) == expected
        )

    def table(self) -> str:
        """Per-scenario counts and the messages of checks that did not pass."""
        lines = [f"== conformance {SUITE_VERSION} authorization", "scenario  passed  failed  warnings"]
        for s in self.scenarios:
            lines.append(f"{s.scenario}  {s.passed}  {s.failed}  {s.warnings}")
            lines += [f"  [{s.scenario}:{c}] {m[:300]}" for c, m in s.messages.items()]
        total = [sum(getattr(s, k) for s in self.scenarios) for k in ("passed", "failed", "warnings")]
        lines.append(f"TOTAL  {total[0]}  {total[1]}  {total[2]}")
        return "\n".join(lines + self.notes)


def allowed_warnings(metadata: dict[str, Any]) -> list[str]:
    """The warnings expected of a server that publishes ``metadata``: the CIMD one while the server does
    not offer CIMD (then, and only then), nothing else."""
    return [] if metadata.get("client_id_metadata_document_supported") is True else [CIMD_CHECK]


async def register(http: httpx.AsyncClient, redirect: str) -> str:
    """A public client registered by RFC 7591 with the suite's callback; its ``client_id``."""
    body = {
        "client_name": "MCP conformance suite",
        "redirect_uris": [redirect],
        "grant_types": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_method": "none",
    }
    done = await http.post("/oauth/register/", json=body)
    if done.status_code != 201:
        raise RuntimeError(f"registration refused: {done.status_code} {done.text}")
    return str(done.json()["client_id"])


async def approve(site: LiveServer, authorize_url: str, username: str, password: str) -> str:
    """As the person: open ``authorize_url``, sign in at the site's login, press Allow on the consent page.
    Returns where the site sends the browser back (the suite's callback)."""
    async with httpx.AsyncClient(timeout=30, follow_redirects=False) as browser:
        first = await browser.get(authorize_url)
        if first.status_code != 302 or "/accounts/login/" not in first.headers["location"]:
            raise RuntimeError(f"authorize did not send the person to sign in: {first.status_code}")
        login_url = urljoin(authorize_url, first.headers["location"])
        form = await browser.get(login_url)
        fields = {**hidden_fields(form.text), "username": username, "password": password}
        signed_in = await browser.post(login_url, data=fields, headers={"Referer": login_url})
        if signed_in.status_code != 302:
            raise RuntimeError(f"sign-in failed: {signed_in.status_code}\n{signed_in.text[:2000]}")
        back = urljoin(login_url, signed_in.headers["location"])  # the authorize URL, from ?next=
        consent = await browser.get(back)
        if consent.status_code != 200 or 'name="allow"' not in consent.text:
            raise RuntimeError(f"no consent page: {consent.status_code}\n{consent.text[:2000]}")
        data = {**hidden_fields(consent.text), "allow": "Allow"}
        answered = await browser.post(str(consent.url), data=data, headers={"Referer": str(consent.url)})
        if answered.status_code != 302:
            raise RuntimeError(f"consent not accepted: {answered.status_code}\n{answered.text[:2000]}")
        return str(answered.headers["location"])


class _Output:
    """The command's output, read line by line; :meth:`until` waits for a line with a given start."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self.stream = stream
        self.lines: list[str] = []

    async def until(self, start: str) -> str | None:
        for line in self.lines:
            if line.startswith(start):
                return line
        while True:
            raw = await asyncio.wait_for(self.stream.readline(), WAIT)
            if not raw:
                return None  # the command ended
            line = raw.decode(errors="replace").rstrip("\n")
            self.lines.append(line)
            if line.startswith(start):
                return line

    async def rest(self) -> None:
        while raw := await asyncio.wait_for(self.stream.readline(), WAIT):
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))


async def run_authorization(
    site: LiveServer, output_dir: Path, username: str = "alice", password: str = PASSWORD
) -> AuthorizationRun:
    """Run the ``authorization`` command against ``site`` (issuer ``site.base``, resource ``site.url``) and
    approve its authorize request as ``username``."""
    node, index = suite_paths(SUITE_VERSION)
    if not index.exists():
        raise FileNotFoundError(f"suite {SUITE_VERSION} is not installed at {index}; run scripts/conformance")
    port = free_port()
    callback = f"http://127.0.0.1:{port}/callback"
    async with httpx.AsyncClient(base_url=site.base, timeout=30) as http:
        metadata = (await http.get("/.well-known/oauth-authorization-server")).json()
        client_id = await register(http, callback)
    command = [str(node), str(index), "authorization", "--url", site.base, "--client-id", client_id]
    command += ["--resource", site.url, "--port", str(port), "--output-dir", str(output_dir)]
    process = await asyncio.create_subprocess_exec(
        *command, cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    assert process.stdout is not None
    output, followed, notes = _Output(process.stdout), "", []
    try:
        url = await output.until(f"{metadata['authorization_endpoint']}?")
        if url is not None:
            redirect = await approve(site, url.strip(), username, password)
            if not redirect.startswith(f"{callback}?"):
                notes.append(f"the consent answer went to {redirect}, not the suite's callback")
            elif await output.until("Callback server started:") is not None:  # it listens now
                async with httpx.AsyncClient(timeout=30) as browser:
                    await browser.get(redirect)
                followed = redirect
        await output.rest()
        returncode = await asyncio.wait_for(process.wait(), WAIT)
    finally:
        if process.returncode is None:
            process.kill()
            with contextlib.suppress(ProcessLookupError):
                await process.wait()
    return AuthorizationRun(
        read_results(output_dir), "\n".join(output.lines), returncode, metadata, followed, notes
    )


def main(argv: list[str] | None = None) -> int:
    """Command line: a fresh demo site with its authorization server on, user ``alice``, one run."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-o", "--output-dir", type=Path, help="where results go (default: a temp dir)")
    args = parser.parse_args(argv)
    root = args.output_dir or Path(tempfile.mkdtemp(prefix="mcp-conformance-authorization-"))
    site = start_oauth_server(root / "site")
    try:
        run = asyncio.run(run_authorization(site, root / "results"))
    finally:
        site.stop()
    print(run.output, end="\n\n")
    print(run.table())
    print(f"authorization {'ok' if run.ok else 'NOT OK'} ({root})")
    return 0 if run.ok else 1


if __name__ == "__main__":
    sys.exit(main())
