"""Handlers that misbehave on purpose: the reply guarantee must still answer each request exactly once."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from mcp_server import App, Context, mcp
from mcp_server.core.records import request_key
from mcp_server.runtime import Runtime
from project.mcp_servers import conformance


@mcp.tool
async def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@mcp.tool
def echo_sync(text: str) -> str:
    """Return the text unchanged, from a sync handler (a worker thread): ``bench/compare.py``'s c16-sync."""
    return text


@mcp.tool
async def slow(seconds: float = 30.0) -> str:
    """Sleep, then answer (used for cancels, deadlines and session ends)."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@mcp.tool
def blocking_sleep(seconds: float = 0.5) -> str:
    """A sync handler that blocks its thread; the event loop must stay free."""
    time.sleep(seconds)
    return "done"


@mcp.tool
async def returns_none() -> None:
    """A tool that returns nothing: a valid result with empty content."""
    return None


@mcp.tool
def stored_integer(value: int) -> int:
    """``value`` through the database as a 64-bit integer: past 64 bits the database refuses it (SQLite's
    "too large to convert", PostgreSQL's "bigint out of range"), an exception whose text is the server's."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("select cast(%s as bigint)", [value])
        return int(cursor.fetchone()[0])


@mcp.tool
async def raises() -> str:
    """A tool whose body raises: an isError result."""
    raise RuntimeError("boom")


@mcp.tool(timeout=0.5)
async def short_deadline(seconds: float = 5.0) -> str:
    """A tool with its own 0.5 s deadline."""
    await asyncio.sleep(seconds)
    return "too late"


@mcp.tool
async def progress(steps: int, ctx: Context) -> str:
    """Report progress ``steps`` times."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
    return "done"


@mcp.method("test/none")
async def raw_none(params: dict[str, Any], ctx: Context) -> dict[str, Any] | None:
    """A raw method that returns nothing: must be answered with -32603."""
    return None


@mcp.method("test/raise")
async def raw_raise(params: dict[str, Any]) -> dict[str, Any]:
    """A raw method that raises: must be answered with -32603."""
    raise ValueError("raw failure")


@mcp.method("test/echo")
def raw_echo(params: dict[str, Any]) -> dict[str, Any]:
    """A sync raw method."""
    return {"params": params}


@mcp.method("test/stats")
async def raw_stats(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """What this worker holds: in-flight entries (ids of the caller's session), waiting answers, tasks,
    open ``subscriptions/listen`` streams."""
    runtime = ctx.runtime
    assert isinstance(runtime, Runtime)
    await runtime.writer.flush()  # what is settled is recorded before the ledger is read
    mine = [e.request_id for e in runtime.requests.pending(ctx.session_id) if e.request_id != ctx.request_id]
    own = request_key(ctx.request_id)  # (a string id's key is not "i:...")
    ledger_pending = [r for r in await runtime.ledger.apending() if r.request_key != own]
    return {
        "ledger_pending": len(ledger_pending),
        "inflight": len(runtime.requests) - 1,
        "outbound": len(runtime.outbound),
        "tasks": len(asyncio.all_tasks()),
        "pending": mine,
        "listeners": len(runtime.listeners),
    }


@mcp.method("test/collect")
async def raw_collect(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """A full garbage collection in this worker: the objects it freed and the RSS (KiB) before and after
    (``bench/task_memory.py``: what only a collection would have given back). ``{"pause": true}``: collect,
    then turn the collector off (what requests leave in cycles piles up); ``{"types": true}``: collect, name
    the types of what it freed (what only cycles kept alive), and turn the collector back on."""
    import gc
    from pathlib import Path

    def rss() -> int:
        status = Path("/proc/self/status").read_text()
        return next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)

    before = rss()
    if params.get("pause"):
        gc.collect()
        gc.disable()
        return {"paused": True}
    if not params.get("types"):
        return {"collected": gc.collect(), "rss_before": before, "rss_after": rss()}
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        collected = gc.collect()
        types: dict[str, int] = {}
        for garbage in gc.garbage:
            kind = type(garbage)
            name = f"{kind.__module__}.{kind.__qualname__}"
            types[name] = types.get(name, 0) + 1
        gc.garbage.clear()
    finally:
        gc.set_debug(0)
        gc.enable()
    return {"collected": collected, "rss_before": before, "rss_after": rss(), "types": types}


@mcp.method("test/ledger_pending")
async def raw_ledger_pending(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Pending requests of the caller's session (or ``params["session"]``) in the ledger (any backend)."""
    runtime = ctx.runtime
    assert isinstance(runtime, Runtime)
    await runtime.writer.flush()
    own = request_key(ctx.request_id)
    records = await runtime.ledger.apending(str(params.get("session") or ctx.session_id))
    return {"pending": [r.request_id for r in records if r.request_key != own]}


@mcp.method("test/notify")
async def raw_notify(params: dict[str, Any]) -> dict[str, Any]:
    """Send ``resources/updated`` for ``params["uri"]`` or ``list_changed`` for ``params["feature"]``."""
    from mcp_server.updates import anotify_list_changed, anotify_resource_updated

    if "uri" in params:
        return {"notified": await anotify_resource_updated(str(params["uri"]))}
    return {"notified": await anotify_list_changed(str(params["feature"]))}


@mcp.method("test/churn_tool")
async def raw_churn_tool(params: dict[str, Any]) -> dict[str, Any]:
    """Register a tool at run time and remove it again (each change announced by ``watch_registry``);
    returns once both announcements have gone out."""
    import asyncio

    @mcp.tool(name="churned_tool")
    async def churned_tool() -> str:
        """Lives for the length of one request."""
        return "churned"

    mcp.remove_tool("churned_tool")
    await asyncio.gather(*list(mcp.notifying))
    return {"tools": len(mcp.tools)}


# The test site also serves the conformance fixtures at /mcp, so that live-server tests can use them there.
mcp.include(conformance)


# -- feature fixtures (tests/end_to_end/test_features.py) ----------------------------------------------------

from mcp_server import JSONRPCError  # noqa: E402
from mcp_server.core.context import LOG_LEVELS  # noqa: E402

FEATURE_ELICIT_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
FEATURE_COLOURS = [f"colour-{n:03d}" for n in range(150)]


@mcp.tool
async def feature_elicit(message: str, ctx: Context) -> dict[str, Any]:
    """Elicit a name: the client's answer, or the error it answered with, exactly as the tool saw it."""
    try:
        return {"answer": await ctx.elicit(message, FEATURE_ELICIT_SCHEMA)}
    except JSONRPCError as exc:
        return {"error": exc.to_error()}


@mcp.tool
async def feature_sample(prompt: str, ctx: Context) -> dict[str, Any]:
    """Sample with a system prompt and an extra field: the client's result or error, as the tool saw it."""
    try:
        result = await ctx.sample(prompt, max_tokens=42, system_prompt="Be brief.", temperature=0.25)
        return {"answer": result}
    except JSONRPCError as exc:
        return {"error": exc.to_error()}


@mcp.tool
async def feature_roots(ctx: Context) -> dict[str, Any]:
    """The client's roots, or the error it answered ``roots/list`` with."""
    try:
        return {"roots": await ctx.list_roots()}
    except JSONRPCError as exc:
        return {"error": exc.to_error()}


@mcp.tool
async def feature_log(ctx: Context) -> str:
    """One message per level (logger ``features``), one through each shortcut (no logger), an end mark."""
    for level in LOG_LEVELS:
        await ctx.log(level, {"level": level}, logger="features")
    await ctx.debug("via debug")
    await ctx.info("via info")
    await ctx.warning("via warning")
    await ctx.error("via error")
    await ctx.log("emergency", "end", logger="features.end")  # the last message: tests wait for it
    return "logged"


@mcp.prompt
async def feature_palette(colour: str, shade: str = "") -> str:
    """A prompt whose ``colour`` argument has many completions and ``shade`` a ready-made ``Completion``."""
    return f"{colour} {shade}"


@mcp.completion(prompt="feature_palette")
async def complete_feature_palette(argument: str, value: str, context: dict[str, str]) -> Any:
    """``colour``: the colours starting with ``value``; ``shade``: a Completion dict naming the context."""
    if argument == "shade":
        return {"values": [f"{context.get('colour', '?')}-{value}light"], "total": 7, "hasMore": True}
    return [c for c in FEATURE_COLOURS if c.startswith(value)]


# -- race gates (tests/end_to_end/test_multiprocess_races.py) ------------------------------------------------

import json as _race_json  # noqa: E402
import os as _race_os  # noqa: E402
from functools import cache as _race_cache  # noqa: E402

RACE_GATE_WAIT = 60.0
"""How long a gated handler waits for its gate before it gives up (its test has failed long before)."""
_race_deadlines: dict[str, asyncio.Timeout] = {}
"""Each gated handler's deadline scope, by gate, for ``test/deadline``."""


@_race_cache
def _race_redis() -> Any:
    """This worker's own Redis client for the gates: no read timeout, since it blocks on ``BLPOP``."""
    import redis
    from django.conf import settings

    url = getattr(settings, "REDIS_URL", None)
    if not url:
        raise RuntimeError("race gates need Redis (REDIS_URL)")
    return redis.Redis.from_url(url, socket_timeout=None)


def _race_key(kind: str, gate: str) -> str:
    """The Redis list ``race:<kind>:<gate>`` under the site's cache prefix (``KEY_PREFIX:1:...``)."""
    from django.core.cache import caches

    return str(caches["default"].make_key(f"race:{kind}:{gate}"))


def _race_gate(gate: str, ctx: Context) -> str:
    """Report the start, block this worker thread until the test opens ``gate``, report the end."""
    client = _race_redis()
    if ctx.deadline is not None:
        _race_deadlines.setdefault(gate, ctx.deadline)
    entry = getattr(ctx.peer, "entry", None)
    started = {"pid": _race_os.getpid(), "pk": entry.record.pk if entry is not None else None}
    client.rpush(_race_key("started", gate), _race_json.dumps(started))
    client.expire(_race_key("started", gate), 600)
    opened = client.blpop([_race_key("gate", gate)], timeout=RACE_GATE_WAIT)
    result = f"gate {gate} opened" if opened is not None else f"gate {gate} never opened"
    client.rpush(_race_key("done", gate), result)
    client.expire(_race_key("done", gate), 600)
    return result


@mcp.method("test/deadline")
async def raw_deadline(params: dict[str, Any]) -> dict[str, Any]:
    """The timer of the deadline of the handler gated by ``params["gate"]`` in this worker
    (``tests.support.deadlines.timer_state``: whether it fired, whether it is still scheduled)."""
    from tests.support.deadlines import timer_state

    return timer_state(_race_deadlines[str(params["gate"])])


@mcp.tool
def race_gate(gate: str, ctx: Context) -> str:
    """Block a worker thread until the test opens ``gate`` (an ``RPUSH`` on ``race:gate:<gate>``).

    A thread is not stopped by a cancel, a session end or an abort: the handler runs on and finishes after
    whoever settled the request first. It pushes ``{"pid", "pk"}`` (this worker, the request's ledger key)
    on ``race:started:<gate>`` when it starts and its result on ``race:done:<gate>`` when it ends, so the
    test waits on real events (``BLPOP``) rather than on time.
    """
    return _race_gate(gate, ctx)


@mcp.tool(timeout=1.0)
def race_gate_deadline(gate: str, ctx: Context) -> str:
    """``race_gate`` with a 1 s deadline: the thread outlives it, and its late result must be dropped."""
    return _race_gate(gate, ctx)


def _race_write(gate: str, name: str, ctx: Context, claim: str) -> str:
    """``late``: block on ``gate`` (as ``race_gate``), then create the author ``name`` and claim the answer in
    one transaction; ``early``: create, claim and commit first, then block. Pushes ``committed`` or
    ``rolled back`` on ``race:written:<gate>``."""
    from django.db import transaction

    from mcp_server.wire.errors import RequestSettled
    from project.catalogue.models import Author

    result = _race_gate(gate, ctx) if claim == "late" else f"gate {gate} opened"
    client = _race_redis()
    try:
        with transaction.atomic():
            Author.objects.create(name=name)
            ctx.claim_answer()
    except RequestSettled:
        client.rpush(_race_key("written", gate), "rolled back")
        raise
    client.rpush(_race_key("written", gate), "committed")
    return _race_gate(gate, ctx) if claim == "early" else result


@mcp.tool
def race_write(gate: str, name: str, ctx: Context, claim: str = "late") -> str:
    """A write that claims its answer before it commits (tests/end_to_end/test_multiprocess_races.py)."""
    return _race_write(gate, name, ctx, claim)


@mcp.tool(timeout=1.0)
def race_write_deadline(gate: str, name: str, ctx: Context, claim: str = "late") -> str:
    """``race_write`` with a 1 s deadline."""
    return _race_write(gate, name, ctx, claim)


@mcp.tool
def write_author(name: str, ctx: Context, rollback: bool = False) -> int:
    """A write as a handler of its own does it (tests/end_to_end/test_live_writes.py, bench/writes.py):
    read, then write, in one ``write_transaction``, claiming the answer last; ``rollback``: the transaction
    rolls back after the claim (the answer stands: the handler's result)."""
    from django.db import transaction

    from mcp_server import write_transaction
    from project.catalogue.models import Author

    with write_transaction():
        author, _created = Author.objects.get_or_create(name=name)
        author.save()
        ctx.claim_answer()
        transaction.set_rollback(rollback)
    return int(author.pk)


# -- hostile input (tests/end_to_end/transports/test_hostile_http.py) ----------------------------------------


@mcp.method("test/ledger_records")
async def raw_ledger_records(params: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """Every ledger record of the caller's session (or ``params["session"]``), settled or not, as stored
    (database or cache ledger): what the hostile-input tests check was recorded."""
    from asgiref.sync import sync_to_async

    from mcp_server.stores.ledger.cache import CacheLedger
    from mcp_server.stores.ledger.database import DatabaseLedger

    runtime = ctx.runtime
    assert isinstance(runtime, Runtime)
    await runtime.writer.flush()
    session = str(params.get("session") or ctx.session_id)
    ledger = runtime.ledger
    if isinstance(ledger, DatabaseLedger):
        rows = ledger.model.objects.filter(session_id=session).order_by("pk")
        found = [
            (row.request_key, row.request_id, row.method, row.name, row.state, row.outcome)
            async for row in rows
        ]
    else:
        assert isinstance(ledger, CacheLedger)

        def scan() -> list[Any]:
            high = int(ledger.cache.get(ledger._k("seq")) or 0)
            return [
                r for r in map(ledger._get, range(1, high + 1)) if r is not None and r.session_id == session
            ]

        stored = await sync_to_async(scan, thread_sensitive=False)()
        found = [(r.request_key, r.request_id, r.method, r.name, r.state, r.outcome) for r in stored]
    keys = ("request_key", "request_id", "method", "name", "state", "outcome")
    return {"records": [dict(zip(keys, values, strict=True)) for values in found]}


# -- resumable streams (end_to_end/transports/test_resumable.py, end_to_end/test_resume_workers.py) ----------

_step_gates: dict[str, asyncio.Event] = {}


async def _step_gate(gate: str) -> None:
    """Wait until the test opens ``gate`` (``test/open_step_gate``): in this process, or over Redis when the
    site has it (the gate may be opened through another worker)."""
    from django.conf import settings

    if getattr(settings, "REDIS_URL", None):
        opened = await asyncio.to_thread(_race_redis().blpop, [_race_key("step", gate)], RACE_GATE_WAIT)
        if opened is None:
            raise RuntimeError(f"step gate {gate} never opened")
        return
    event = _step_gates.setdefault(gate, asyncio.Event())
    await asyncio.wait_for(event.wait(), RACE_GATE_WAIT)


@mcp.tool
async def gated_steps(gate: str, ctx: Context, close_stream: bool = False) -> str:
    """Progress 1 of 3, then (after closing its stream, if asked) wait for ``gate``, then progress 2 and 3 and
    the result: a client whose stream is cut at the gate must get the rest on the resumed stream."""
    await ctx.report_progress(1, 3, "before the gate")
    if close_stream:
        await ctx.close_stream()
    await _step_gate(gate)
    await ctx.report_progress(2, 3, "after the gate")
    await ctx.report_progress(3, 3, "last step")
    return f"passed gate {gate}"


@mcp.method("test/open_step_gate")
async def raw_open_step_gate(params: dict[str, Any]) -> dict[str, Any]:
    """Open the gate ``params["gate"]`` of ``gated_steps`` (for every worker: over Redis if there is one)."""
    from django.conf import settings

    gate = str(params["gate"])
    if getattr(settings, "REDIS_URL", None):
        client = _race_redis()
        await asyncio.to_thread(client.rpush, _race_key("step", gate), "open")
        await asyncio.to_thread(client.expire, _race_key("step", gate), 600)
    else:
        _step_gates.setdefault(gate, asyncio.Event()).set()
    return {"opened": gate}


# -- MCP Apps (tests/end_to_end/test_apps.py) ---------------------------------------------------------------

PROBE_VIEW = App(
    "testapp/probe_view.html",
    name="probe",
    permissions={"clipboardWrite": {}},
    prefers_border=False,
    domain="probe.example",
)


@mcp.tool(app=PROBE_VIEW)
async def apps_probe(ctx: Context) -> dict[str, bool]:
    """Whether the client declared MCP Apps (``ctx.client_supports_apps``), shown in the probe view."""
    return {"apps": ctx.client_supports_apps}


@mcp.tool(app=App("testapp/probe_view.html", name="staff-probe", permission=lambda user: user.is_staff))
async def apps_staff_probe() -> str:
    """A tool whose view only staff may read."""
    return "staff"
