"""A live server's sessions seen in its SQLite file: the file, a session's row moved back in time."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.support.live import LiveServer

__all__ = ["backdate", "database_file"]


def database_file(server: LiveServer) -> Path:
    url = server.env["DATABASE_URL"]
    assert url.startswith("sqlite:///")
    return Path(url.removeprefix("sqlite:///"))


def backdate(server: LiveServer, session_id: str, seconds: float) -> datetime:
    """Move ``last_seen`` into the past, as if the session had been idle that long."""
    when = datetime.now(UTC) - timedelta(seconds=seconds)
    with closing(sqlite3.connect(database_file(server), timeout=30)) as db, db:
        updated = db.execute(
            "UPDATE mcp_server_session SET last_seen = ? WHERE id = ?",
            (when.replace(tzinfo=None).isoformat(sep=" "), session_id),
        ).rowcount
    assert updated == 1
    return when
