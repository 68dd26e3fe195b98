"""The distribution as a user gets it: ``python -m build`` makes a wheel and an sdist, the wheel installs into
a fresh virtualenv (with its dependencies, from the index pip is configured with), and a new site made there
with the documented installation steps passes ``manage.py check``. The wheel holds every file of the package
(templates, static files, migrations, ``py.typed``) and nothing else: no tests, docs or demo site.

One module-scoped build and venv (about 20 s on two cores); marked ``packaging``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.support.live import ROOT
from tests.support.new_site import doc_blocks

pytestmark = pytest.mark.packaging

VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def package_files() -> set[str]:
    """Every file of ``mcp_server/`` in the source tree, as a path inside the wheel (no bytecode)."""
    return {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "mcp_server").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    command = [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_the_version_is_the_changelogs() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    newest = re.search(r"^## \[(\d+\.\d+\.\d+)\]", changelog, re.M)
    assert newest is not None
    assert newest.group(1) == VERSION


def test_the_wheel_holds_the_package_and_nothing_else(dist: Path) -> None:
    wheel = dist / f"django_mcp_ledger-{VERSION}-py3-none-any.whl"
    names = set(zipfile.ZipFile(wheel).namelist())
    tops = {name.split("/")[0] for name in names}
    assert tops == {"mcp_server", f"django_mcp_ledger-{VERSION}.dist-info"}
    assert {name for name in names if name.startswith("mcp_server/")} == package_files()
    for needed in (
        "mcp_server/py.typed",
        "mcp_server/migrations/0001_initial.py",
        "mcp_server/oauth/templates/mcp_server/oauth/consent.html",
    ):
        assert needed in names


def test_the_wheels_metadata_names_the_docs_and_the_supported_versions(dist: Path) -> None:
    """What PyPI shows beside the package: the documentation and changelog links, and the Django and Python
    versions the CI runs (``.ci/run``: Django 5.2 on 3.11, Django 6 on 3.12 or 3.13)."""
    wheel = dist / f"django_mcp_ledger-{VERSION}-py3-none-any.whl"
    metadata = zipfile.ZipFile(wheel).read(f"django_mcp_ledger-{VERSION}.dist-info/METADATA").decode()
    urls = dict(
        line.split(": ", 1)[1].split(", ", 1)
        for line in metadata.splitlines()
        if line.startswith("Project-URL: ")
    )
    assert urls["Documentation"].startswith("https://")
    assert urls["Changelog"].endswith("/changelog.html")  # docs/changelog.md, which includes CHANGELOG.md
    classifiers = {
        line.split(": ", 1)[1] for line in metadata.splitlines() if line.startswith("Classifier: ")
    }
    for django in ("5.2", "6.0", "6.1"):
        assert f"Framework :: Django :: {django}" in classifiers
    for python in ("3.11", "3.12", "3.13"):
        assert f"Programming Language :: Python :: {python}" in classifiers
    assert "Typing :: Typed" in classifiers


def test_the_sdist_holds_the_package_and_no_tests_docs_or_demo(dist: Path) -> None:
    with tarfile.open(dist / f"django_mcp_ledger-{VERSION}.tar.gz") as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert package_files() <= names
    assert {"pyproject.toml", "README.md", "PKG-INFO"} <= names
    assert not {name for name in names if name.startswith(("tests/", "docs/", "project/", "bench/"))}


def user_env(venv: Path) -> dict[str, str]:
    """A user's shell with the fresh venv first on ``PATH``: pip's own settings kept, the suite's dropped."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DJANGO_SETTINGS_MODULE", "DATABASE_URL", "REDIS_URL", "PYTHONPATH", "VIRTUAL_ENV"}
        and not k.startswith(("MCP_TEST", "COV_", "COVERAGE"))
    }
    return {**env, "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"}


def venv_python(directory: Path) -> Path:
    done = subprocess.run([sys.executable, "-m", "venv", str(directory)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return directory / "bin" / "python"


def test_the_wheel_installs_and_a_new_site_passes_check(dist: Path, tmp_path: Path) -> None:
    python = venv_python(tmp_path / "venv")
    wheel = dist / f"django_mcp_ledger-{VERSION}-py3-none-any.whl"
    env = user_env(tmp_path / "venv")
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    site = tmp_path / "site"
    site.mkdir()

    def run(*args: str) -> str:
        done = subprocess.run([str(python), *args], cwd=site, env=env, capture_output=True, text=True)
        assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
        return done.stdout + done.stderr

    run("-m", "django", "startproject", "mysite", ".")
    blocks = doc_blocks("howto/add-to-a-site")
    with (site / "mysite" / "settings.py").open("a") as out:
        out.write("\n" + blocks["settings.py"])
    with (site / "mysite" / "asgi.py").open("a") as out:
        out.write("\n" + blocks["asgi.py"])
    where = run("-c", "import mcp_server, pathlib; print(pathlib.Path(mcp_server.__file__).parent)").strip()
    assert Path(where).is_relative_to(tmp_path / "venv"), where  # the wheel's copy, not the source tree
    assert (Path(where) / "py.typed").is_file()
    assert "System check identified no issues" in run("manage.py", "check", "--fail-level", "WARNING")
    assert "No changes detected" in run("manage.py", "makemigrations", "--check", "--dry-run", "mcp_server")
    assert "Applying mcp_server.0001_initial... OK" in run("manage.py", "migrate")
