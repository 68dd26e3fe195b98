"""``mcp_server.W036``: a SQLite database begins its transactions deferred, or waits less than 5 s for its
write lock (``OPTIONS``: ``transaction_mode``, ``timeout``)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Tags, Warning, register

__all__ = ["SQLITE_OPTIONS", "check_sqlite_options"]


SQLITE_OPTIONS = {
    "transaction_mode": "IMMEDIATE",
    "timeout": 20,
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
}
"""The SQLite ``OPTIONS`` the documented setup shows (docs/howto/add-to-a-site.md) (W036)."""


@register(Tags.compatibility)
def check_sqlite_options(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """W036: a SQLite database begins its transactions deferred, or waits less than 5 s for the write lock."""
    messages: list[CheckMessage] = []
    for alias, database in getattr(settings, "DATABASES", {}).items():
        if not str(database.get("ENGINE", "")).endswith("sqlite3"):
            continue
        options = database.get("OPTIONS") or {}
        problems = []
        if str(options.get("transaction_mode") or "DEFERRED").upper() not in {"IMMEDIATE", "EXCLUSIVE"}:
            problems.append(
                "begins transactions DEFERRED: a transaction that reads, then writes (a handler's own "
                "transaction.atomic around claim_answer) fails at once with 'database is locked' while "
                "another connection writes (the ledger writer's, another worker's)"
            )
        timeout = options.get("timeout", 5)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 5:
            problems.append(f"waits {timeout!r}s for the write lock (timeout)")
        messages += [
            Warning(
                f"SQLite database {alias!r} {problem}.",
                hint=f"Set DATABASES[{alias!r}]['OPTIONS'] = {SQLITE_OPTIONS!r} (docs/explanation/writes.md"
                "), or write through mcp_server.write_transaction.",
                id="mcp_server.W036",
            )
            for problem in problems
        ]
    return messages
