"""The demo site's home page tells a newcomer commands that run as shown: from another directory, without the
virtualenv activated (issue 15: ``python manage.py createsuperuser`` failed outside it)."""

from __future__ import annotations

import html
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from django.test import Client

from tests.support.live import ROOT


@pytest.fixture
def home(client: Client) -> str:
    response = client.get("/")
    assert response.status_code == 200
    return response.content.decode()


def test_home_page_commands_run_from_anywhere_without_the_virtualenv(home: str, tmp_path: Path) -> None:
    commands = [html.unescape(code) for code in re.findall(r"<code>([^<]*manage\.py[^<]*)</code>", home)]
    verbs = {shlex.split(command)[2] for command in commands}
    assert verbs == {"createsuperuser", "mcp_stdio", "mcp_token"}
    env = {
        "PATH": "/usr/bin:/bin",  # no virtualenv on PATH, none activated
        "HOME": os.environ.get("HOME", "/tmp"),
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "PYTHONPATH": str(ROOT),  # the checkout under test, should another be installed
    }
    for command in commands:
        argv = shlex.split(command)
        assert os.path.isabs(argv[0]), command
        assert os.path.isabs(argv[1]), command
        done = subprocess.run([*argv[:3], "--help"], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert done.returncode == 0, f"{command}: {done.stderr}"
        assert f"manage.py {argv[2]}" in done.stdout
