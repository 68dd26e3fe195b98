"""Fixtures: live servers in each response mode, raw HTTP helpers."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support import forked
from tests.support.live import SHELLS, LiveServer, drop_templates, start_server
from tests.support.schedule import slowest_first

pytest_plugins = ["tests.support.collector"]  # no_collection


@pytest.fixture(scope="session", autouse=True)
def _session_helpers() -> Iterator[None]:
    """End the session's ``manage.py shell`` runners (``tests.support.live.run_shell``), drop its migrated
    templates (``tests.support.live.migrated_template``, ``postgres_database``), end its forkserver
    (``tests.support.forkserver``)."""
    yield
    SHELLS.close()
    drop_templates()
    forked.close_forkserver()


@pytest.fixture(scope="session")
def servers_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("servers")


_server_names = itertools.count()
"""Names of the session's servers (their database and log files in ``servers_dir``), unique in the session."""


@contextmanager
def _starter(servers_dir: Path) -> Iterator[Callable[..., LiveServer]]:
    started: list[LiveServer] = []

    def _start(overrides: dict[str, Any] | None = None, **env: str) -> LiveServer:
        server = start_server(servers_dir, overrides, name=f"s{next(_server_names)}", **env)
        started.append(server)
        return server

    try:
        yield _start
    finally:
        for server in started:
            server.stop()


@pytest.fixture(scope="module")
def start(servers_dir: Path) -> Iterator[Callable[..., LiveServer]]:
    """Start extra servers (stopped at the end of the module that started them)."""
    with _starter(servers_dir) as _start:
        yield _start


@pytest.fixture(scope="session")
def session_start(servers_dir: Path) -> Iterator[Callable[..., LiveServer]]:
    """Start servers shared by the session's modules (stopped at the end of the session)."""
    with _starter(servers_dir) as _start:
        yield _start


@pytest.fixture(scope="session", params=["auto", "sse", "json"])
def any_mode_server(request: pytest.FixtureRequest, session_start: Callable[..., LiveServer]) -> LiveServer:
    """One live server per response mode."""
    return session_start({"RESPONSE_MODE": request.param})


@pytest.fixture(autouse=True)
def _live_server_helper() -> None:
    """Shadows pytest-django's autouse helper, which expects its own ``live_server`` and a test database."""


@pytest.fixture(scope="session")
def live_server(session_start: Callable[..., LiveServer]) -> LiveServer:
    """The default live server (``auto`` mode, small limits for the HTTP-rule tests)."""
    return session_start({"MAX_REQUEST_BYTES": 65536})


def pytest_configure(config: pytest.Config) -> None:
    forked.ENABLED = True  # the session's servers, migrations and shell runners fork from it
    config.addinivalue_line(
        "markers", "browser: drives headless Chromium with Playwright (Debian's chromium)"
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The slowest modules first (``tests/support/schedule.py``: how CI's two processes end together)."""
    slowest_first(items)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove what SQLite's WAL mode leaves beside the file test database (see ``tests/settings.py``)."""
    from django.conf import settings

    name = settings.DATABASES["default"].get("TEST", {}).get("NAME")
    if name and settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"):
        for suffix in ("-wal", "-shm"):
            Path(f"{name}{suffix}").unlink(missing_ok=True)
