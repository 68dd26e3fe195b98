"""A site we did not write, with the *Sign in with OAuth* blocks (``docs/howto/oauth.md``) and the production
block (``docs/howto/deploy.md``): ``manage.py check --deploy`` is clean, and says what is wrong once HTTPS is
taken out.

The blocks are read from the documentation (``doc_blocks``), so the documentation and this test cannot drift
apart. No store is reached: ``check`` inspects the settings only, so the PostgreSQL and Redis of the block
need not exist.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.live import ROOT
from tests.support.new_site import SITE, build_site, doc_blocks, site_env

OAUTH = "howto/oauth"
HTTPS_LINES = ("SECURE_PROXY_SSL_HEADER = ", "SECURE_SSL_REDIRECT = ")
"""The lines of the production block that make the site HTTPS-only behind its TLS proxy."""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``startproject`` with the installation steps, then the OAuth blocks and a production settings module
    of the documented block (``production.py``), and one without its HTTPS lines (``plain.py``)."""
    directory = build_site(tmp_path_factory.mktemp("new-site-oauth") / "site", protected=False)
    oauth = doc_blocks(OAUTH)
    with (directory / SITE / "settings.py").open("a") as out:
        out.write("\n" + oauth["settings.py"])
    with (directory / SITE / "urls.py").open("a") as out:
        out.write("\n" + oauth["urls.py"])
    production = doc_blocks("howto/deploy")["settings.py"]
    head = (
        f"import os\n\nfrom {SITE}.settings import *  # noqa\n"
        f"from {SITE}.settings import BASE_DIR, MIDDLEWARE\n\n"
        "DEBUG = False\nSECRET_KEY = os.environ['DJANGO_SECRET_KEY']\nALLOWED_HOSTS = ['mcp.example.com']\n\n"
    )
    (directory / SITE / "production.py").write_text(head + production)
    plain = [line for line in production.splitlines() if not line.startswith(HTTPS_LINES)]
    assert len(plain) == len(production.splitlines()) - len(HTTPS_LINES)
    (directory / SITE / "plain.py").write_text(head + "\n".join(plain) + "\n")
    return directory


def check_deploy(directory: Path, module: str) -> subprocess.CompletedProcess[str]:
    env = {
        **site_env(directory),
        "DJANGO_SETTINGS_MODULE": f"{SITE}.{module}",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
    }
    command = [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"]
    return subprocess.run(command, cwd=directory, env=env, capture_output=True, text=True, timeout=300)


def test_the_documented_blocks_make_the_site_an_authorization_server(site: Path) -> None:
    """What check --deploy judges below is the authorization server: its apps and URLs are in."""
    code = (
        "import django; django.setup(); from django.apps import apps; from django.urls import reverse;"
        "print(apps.is_installed('mcp_server.oauth'), reverse('oauth2_provider:oauth-server-metadata'),"
        " reverse('login'))"
    )
    env = {**site_env(site), "DJANGO_SETTINGS_MODULE": f"{SITE}.production", "DJANGO_SECRET_KEY": "x" * 50}
    done = subprocess.run([sys.executable, "-c", code], cwd=site, env=env, capture_output=True, text=True)
    assert done.stdout.split() == ["True", "/.well-known/oauth-authorization-server", "/accounts/login/"], (
        done.stderr
    )


def test_check_deploy_is_clean_with_the_documented_production_block(site: Path) -> None:
    done = check_deploy(site, "production")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues (1 silenced)." in done.stdout, done.stdout + done.stderr


def test_without_https_check_deploy_names_what_is_missing(site: Path) -> None:
    done = check_deploy(site, "plain")
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "mcp_server.W061" in out  # tokens and codes would travel in clear
    assert "security.W008" in out  # Django's own: SECURE_SSL_REDIRECT
    assert "oauth2_provider.W008" not in out  # still silenced: only the HTTPS lines are gone


def test_the_demos_production_settings_pass_check_deploy_with_the_server_on(tmp_path: Path) -> None:
    """``project/production.py`` (what the documented block is to the demo) with ``MCP_DEMO_OAUTH=1``; the
    stores' URLs are only read, never reached."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_TEST") and k != "DJANGO_DEBUG"}
    env.update(
        DJANGO_SETTINGS_MODULE="project.production",
        MCP_DEMO_OAUTH="1",
        DATABASE_URL="postgres://postgres@127.0.0.1:5432/never_reached",
        REDIS_URL="redis://127.0.0.1:6379/15",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(50),
        DJANGO_ALLOWED_HOSTS="mcp.example.com",
        DJANGO_STATIC_ROOT=str(tmp_path),
        PYTHONPATH=str(ROOT),
    )
    command = [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues (1 silenced)." in done.stdout, done.stdout + done.stderr
    listed = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django; django.setup(); from django.apps import apps;"
            "print(apps.is_installed('mcp_server.oauth'))",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert listed.stdout.strip() == "True", listed.stderr
