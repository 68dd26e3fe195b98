"""``manage.py mcp_prune`` and ``manage.py mcp_token`` as an operator runs them: real processes, their
output and exit codes, on SQLite, PostgreSQL and (for the cache ledger) Redis.

Each command runs through Django's own command line (``execute_from_command_line``, what ``manage.py``
calls) in a fresh fork of a process that has set Django up (``tests.support.live.run_manage``): the
interpreter's and Django's start-up are paid once per environment, not once per command. One test runs
``python manage.py`` itself, the script an operator types.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.live import (
    REDIS_URL,
    ROOT,
    base_env,
    migrated_template,
    postgres_database,
    redis_namespace,
    require_services,
    run_manage,
    run_shell,
)

LEDGERS = {
    "database": "mcp_server.stores.ledger.database.DatabaseLedger",
    "cache": "mcp_server.stores.ledger.cache.CacheLedger",
}


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``manage.py <args>`` (:func:`~tests.support.live.run_manage`); never raises on a non-zero exit code."""
    return run_manage(env, *args)


def manage_process(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``python manage.py <args>`` in a process of its own; never raises on a non-zero exit code."""
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def shell(env: dict[str, str], code: str) -> Any:
    """Run ``code`` as ``manage.py shell -c`` does (``tests.support.live.run_shell``); returns the JSON it
    prints last."""
    return json.loads(run_shell(env, code).stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return migrated_template(tmp_path_factory.mktemp("management"))


@pytest.fixture
def sqlite_file(template: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "db.sqlite3"
    shutil.copy(template, copy)
    return copy


# -- mcp_prune ------------------------------------------------------------------------------------------


@pytest.fixture(params=["database-sqlite", "database-postgres", "cache-redis"])
def ledger_env(request: pytest.FixtureRequest, sqlite_file: Path) -> Iterator[dict[str, str]]:
    """The environment of a site with one ledger backend and store."""
    if request.param == "database-sqlite":
        yield base_env(sqlite_file, {"LEDGER_BACKEND": LEDGERS["database"]})
        return
    require_services()
    if request.param == "database-postgres":
        with postgres_database() as url:
            yield base_env(sqlite_file, {"LEDGER_BACKEND": LEDGERS["database"]}, DATABASE_URL=url)
    else:
        with redis_namespace() as prefix:
            overrides = {"LEDGER_BACKEND": LEDGERS["cache"]}
            yield base_env(sqlite_file, overrides, REDIS_URL=REDIS_URL, MCP_TEST_REDIS_PREFIX=prefix)


SEED = """
import json
from datetime import timedelta

from asgiref.sync import async_to_sync
from django.utils import timezone

from mcp_server.ledger import LedgerRecord, get_ledger
from mcp_server.stores.ledger.cache import CacheLedger
from mcp_server.models import LedgerEntry

ledger = get_ledger()
now = timezone.now()
hour = timedelta(hours=1)
pks = {}


def opened(name, worker="live-worker", created=now, lease=now + hour):
    record = LedgerRecord(
        session_id="prune-test", request_key=f"s:{name}", method="tools/call", name=name,
        worker=worker, created=created, lease_expires=lease,
    )
    async_to_sync(ledger.aopen)(record)
    pks[name] = record.pk
    return record


def settled_at(record, when):
    if isinstance(ledger, CacheLedger):
        key = ledger._k("e", record.pk)
        stored = ledger.cache.get(key)
        stored["settled_at"] = when
        ledger.cache.set(key, stored, None)
    else:
        LedgerEntry.objects.filter(pk=record.pk).update(settled_at=when)


# In pk order: the cache ledger prunes from the oldest pk up to the first one it must keep.
for name, state in (("old_answered", "answered"), ("old_cancelled", "cancelled")):
    record = opened(name, created=now - 3 * hour)
    assert async_to_sync(ledger.asettle)(record, state, None if state == "cancelled" else {"result": True})
    settled_at(record, now - 1.5 * hour)
assert async_to_sync(ledger.asettle)(opened("fresh_answered"), "answered", {"result": True})
opened("orphan", worker="dead-worker", created=now - 2 * hour, lease=now - hour)
opened("old_pending", created=now - 2 * hour)
opened("fresh_pending")
async_to_sync(ledger.arenew_leases)("live-worker", now + hour)  # live-worker is alive
print(json.dumps(pks))
"""

STATES = """
import json

from asgiref.sync import async_to_sync

from mcp_server.ledger import LedgerRecord, get_ledger

ledger = get_ledger()
found = {}
for name, pk in json.loads(PKS).items():
    probe = LedgerRecord(session_id="prune-test", request_key="", method="", pk=pk)
    stored = async_to_sync(ledger.aget)(probe)
    found[name] = None if stored is None else [stored.state, stored.outcome]
print(json.dumps(found))
"""


def said(pruned: int, orphans: int, expired: int = 0, sessions: int = 0) -> str:
    """What ``mcp_prune`` prints."""
    return (
        f"pruned {pruned} settled entries; settled {orphans} orphaned ones; "
        f"ended {expired} idle sessions; pruned {sessions} ended sessions; "
        "failed 0 orphaned tasks; pruned 0 tasks past their TTL\n"
    )


def prune(env: dict[str, str], *args: str) -> str:
    done = manage(env, "mcp_prune", *args)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout


def test_prune_removes_old_settled_entries_settles_orphans_and_keeps_the_rest(
    ledger_env: dict[str, str],
) -> None:
    pks = shell(ledger_env, SEED)
    states = STATES.replace("PKS", repr(json.dumps(pks)))
    orphaned = {"error": {"code": -32000, "message": "Connection closed: the worker serving it stopped"}}

    # Default retention (LEDGER_RETENTION, an hour): the entries settled 90 minutes ago go.
    assert prune(ledger_env) == said(2, 1)
    assert shell(ledger_env, states) == {
        "old_answered": None,
        "old_cancelled": None,
        "fresh_answered": ["answered", {"result": True}],
        "orphan": ["closed", orphaned],  # its worker's lease ran out: settled, not deleted
        "old_pending": ["pending", None],  # old, but its worker is alive
        "fresh_pending": ["pending", None],
    }

    assert prune(ledger_env) == said(0, 0)  # idempotent

    # --older-than 0: everything settled goes, nothing pending does.
    assert prune(ledger_env, "--older-than", "0") == said(2, 0)
    assert shell(ledger_env, states) == {
        "old_answered": None,
        "old_cancelled": None,
        "fresh_answered": None,
        "orphan": None,
        "old_pending": ["pending", None],
        "fresh_pending": ["pending", None],
    }


def test_prune_reads_the_retention_setting(sqlite_file: Path) -> None:
    """LEDGER_RETENTION decides what is old: with three hours, entries settled 90 minutes ago stay."""
    env = base_env(sqlite_file, {"LEDGER_RETENTION": 3 * 3600.0})
    shell(env, SEED)
    assert prune(env) == said(0, 1)
    assert prune(env, "--older-than", "3600") == said(2, 0)


SESSIONS_SEED = """
import json
from datetime import timedelta

from asgiref.sync import async_to_sync
from django.utils import timezone

from mcp_server.ledger import LedgerRecord, get_ledger
from mcp_server.models import Session

now = timezone.now()
hour = timedelta(hours=1)
for name, seen, ended in [
    ("idle", now - 3 * hour, None),
    ("fresh", now, None),
    ("ended-long-ago", now - 3 * hour, now - 2 * hour),
    ("ended-busy", now - 3 * hour, now - 2 * hour),
    ("ended-lately", now, now - timedelta(minutes=5)),
]:
    Session.objects.create(id=name, protocol_version="2025-11-25", last_seen=seen, ended_at=ended)
record = LedgerRecord(session_id="ended-busy", request_key="i:1", method="tools/call", worker="live-worker")
async_to_sync(get_ledger().aopen)(record)
async_to_sync(get_ledger().arenew_leases)("live-worker", now + hour)  # its worker is alive: not an orphan
print(json.dumps(record.pk))
"""

SESSIONS_LEFT = """
import json

from mcp_server.models import Session

print(json.dumps({s.pk: s.end_reason if s.ended_at else None for s in Session.objects.order_by("pk")}))
"""


def test_prune_ends_idle_sessions_and_deletes_ended_ones_with_nothing_pending(
    ledger_env: dict[str, str],
) -> None:
    shell(ledger_env, SESSIONS_SEED)
    assert prune(ledger_env, "--skip-sessions") == (
        "pruned 0 settled entries; settled 0 orphaned ones; failed 0 orphaned tasks; "
        "pruned 0 tasks past their TTL\n"
    )
    assert len(shell(ledger_env, SESSIONS_LEFT)) == 5
    # SESSION_IDLE_TIMEOUT and SESSION_RETENTION (an hour each) by default.
    assert prune(ledger_env) == said(0, 0, expired=1, sessions=1)
    assert shell(ledger_env, SESSIONS_LEFT) == {
        "ended-busy": "",  # a request of its is still pending: kept
        "ended-lately": "",
        "fresh": None,
        "idle": "session expired",
    }
    assert prune(ledger_env, "--sessions-older-than", "0") == said(0, 0, sessions=2)
    assert shell(ledger_env, SESSIONS_LEFT) == {"ended-busy": "", "fresh": None}


def test_prune_refuses_a_bad_session_retention(sqlite_file: Path) -> None:
    done = manage_process(base_env(sqlite_file), "mcp_prune", "--sessions-older-than", "-5")
    assert done.returncode == 1
    assert "CommandError: --sessions-older-than must be a number of seconds, 0 or more" in done.stderr
    assert done.stdout == ""


def test_prune_refuses_a_bad_retention(sqlite_file: Path) -> None:
    env = base_env(sqlite_file)
    for value, code, message in [
        ("an hour", 2, "--older-than: invalid float value: 'an hour'"),
        ("nan", 1, "CommandError: --older-than must be a number of seconds, 0 or more"),
        ("-1", 1, "CommandError: --older-than must be a number of seconds, 0 or more"),
    ]:
        done = manage(env, "mcp_prune", "--older-than", value)
        assert done.returncode == code, done.stderr
        assert message in done.stderr
        assert "Traceback" not in done.stderr
        assert done.stdout == ""


# -- mcp_token ------------------------------------------------------------------------------------------

USERS = """
import json
from django.contrib.auth.models import User

User.objects.create_user("alice")
User.objects.create_user("bob")
print(json.dumps("ok"))
"""

AUTHENTICATE = """
import json

from asgiref.sync import async_to_sync
from django.test import RequestFactory

from mcp_server.auth.base import AuthenticationFailed
from mcp_server.auth.tokens import TokenAuthentication

found = []
for plain in PLAINS:
    request = RequestFactory().get("/mcp", HTTP_AUTHORIZATION="Bearer " + plain)
    try:
        user, token = async_to_sync(TokenAuthentication().authenticate)(request)
    except AuthenticationFailed as exc:
        found.append({"refused": str(exc)})
    else:
        days = None if token.expires is None else (token.expires - token.created).total_seconds() / 86400
        found.append({"user": user.username, "name": token.name, "scopes": token.scopes, "days": days})
print(json.dumps(found))
"""

EXPIRE = """
import json
from datetime import timedelta

from django.utils import timezone

from mcp_server.auth.models import AccessToken

print(json.dumps(AccessToken.objects.filter(pk=PK).update(expires=timezone.now() - timedelta(days=1))))
"""


def authenticate(env: dict[str, str], *plains: str) -> list[dict[str, Any]]:
    """What the bearer-token authentication class makes of each token (the real class, on the database)."""
    return list(shell(env, AUTHENTICATE.replace("PLAINS", repr(list(plains)))))


def token_command(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return manage(env, "mcp_token", *args)


def listing(env: dict[str, str], *args: str) -> dict[str, list[str]]:
    """``mcp_token list`` as columns, by token name."""
    done = token_command(env, "list", *args)
    assert done.returncode == 0, done.stderr
    rows = [line.split("\t") for line in done.stdout.splitlines()]
    return {row[3]: row for row in rows}


def created(done: subprocess.CompletedProcess[str]) -> str:
    """The plain token a ``create`` printed: alone on stdout; the rest went to stderr."""
    assert done.returncode == 0, done.stderr
    plain = done.stdout.strip()
    assert re.fullmatch(r"mcp_[A-Za-z0-9_-]{43}", plain), done.stdout
    assert "it is shown only now" in done.stderr
    return plain


def test_token_create_list_revoke(sqlite_file: Path) -> None:
    env = base_env(sqlite_file)
    shell(env, USERS)

    scoped = created(
        token_command(env, "create", "alice", "--name", "desktop", "--days", "0", "--scope", "tool:echo")
    )
    default = created(token_command(env, "create", "bob", "--name", "ci"))
    short = created(token_command(env, "create", "alice", "--name", "short", "--days", "1.5"))
    unused = listing(env)
    assert {name: row[6] for name, row in unused.items()} == dict.fromkeys(unused, "last used never")
    desktop, ci, brief = authenticate(env, scoped, default, short)
    assert desktop == {"user": "alice", "name": "desktop", "scopes": ["tool:echo"], "days": None}  # never
    assert ci["user"] == "bob"
    assert ci["scopes"] == []
    assert ci["days"] == pytest.approx(90, abs=0.01)  # the default
    assert brief["days"] == pytest.approx(1.5, abs=0.01)

    everyone = listing(env)
    assert set(everyone) == {"desktop", "ci", "short"}
    pk, prefix, *columns = everyone["desktop"]
    assert columns[:4] + columns[5:] == ["alice", "desktop", "valid", "expires never", "tool:echo"]
    assert columns[4].startswith("last used 20")  # it authenticated a request above
    assert scoped.startswith(prefix.removesuffix("…"))
    assert scoped not in "\n".join("\t".join(row) for row in everyone.values())  # never shown again
    assert everyone["ci"][4:] == ["valid", everyone["ci"][5], everyone["ci"][6], "*"]  # no scope: all bob may
    assert everyone["ci"][5].startswith("expires 20")
    assert set(listing(env, "alice")) == {"desktop", "short"}

    assert shell(env, EXPIRE.replace("PK", everyone["short"][0])) == 1
    # Revoke by the prefix, as listed (with its ellipsis), and by id.
    revoked = token_command(env, "revoke", prefix)
    assert revoked.returncode == 0, revoked.stderr
    assert revoked.stdout == f"Revoked token {pk} (desktop ({prefix}))\n"
    by_id = token_command(env, "revoke", everyone["ci"][0])
    assert by_id.returncode == 0, by_id.stderr
    assert by_id.stdout.startswith(f"Revoked token {everyone['ci'][0]} (ci (")
    assert {name: row[4] for name, row in listing(env).items()} == {
        "desktop": "revoked",
        "ci": "revoked",
        "short": "expired",
    }
    assert authenticate(env, scoped, default, short) == [
        {"refused": "The token was revoked"},
        {"refused": "The token was revoked"},
        {"refused": "The token has expired"},
    ]


def test_token_command_errors(sqlite_file: Path) -> None:
    env = base_env(sqlite_file)
    shell(env, USERS)
    for args, message in [
        (
            ("create", "nobody"),
            "No user 'nobody': a token belongs to an existing user. Create the user first "
            "(manage.py createsuperuser for an administrator, or Users > Add in the admin), "
            "then run this again.",
        ),
        (("create", "alice", "--days", "-1"), "--days must be 0 (never expires) or more"),
        (("create", "alice", "--days", "nan"), "--days must be 0 (never expires) or more"),
        (("create", "alice", "--days", "1e9"), "--days 1e+09 is too far in the future"),
        (("revoke", "mcp_nothing"), "0 tokens match 'mcp_nothing'"),
        (("revoke", "999"), "0 tokens match '999'"),
    ]:
        done = token_command(env, *args)
        assert done.returncode == 1, args
        assert f"CommandError: {message}" in done.stderr
        assert "Traceback" not in done.stderr
        assert done.stdout == ""
    assert listing(env) == {}  # nothing was created
