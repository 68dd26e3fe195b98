"""``manage.py mcp_stdio``: serve MCP over stdin and stdout, as desktop clients launch servers.

stdout carries protocol messages only: before serving, file descriptor 1 is pointed at stderr (so
``print``, logging and child processes write there) and the protocol keeps a private copy of the real
stdout; stdin is likewise kept for the protocol and replaced by ``/dev/null``. The process exits 0 once
its input ends (or on SIGTERM / SIGINT, or once a write to stdout fails because the client stopped
reading it) and every request is settled.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from typing import IO, Any, TextIO

from asgiref.sync import sync_to_async
from django.apps import apps
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections
from django.utils.module_loading import import_string

from mcp_server.conf import mcp_settings
from mcp_server.registry.server import MCPServer, mcp

__all__ = [
    "Command",
    "claim_stdio",
    "known_servers",
    "resolve_server",
    "resolve_user",
    "route_logging",
    "run",
]

logger = logging.getLogger("mcp_server.stdio")

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
HANDLER_THREADS = "mcp-handler"


def known_servers() -> dict[str, MCPServer]:
    """Servers by name: the default one and any defined at the top level of an installed app's ``mcp.py``."""
    found: dict[str, MCPServer] = {mcp.key: mcp}
    for config in apps.get_app_configs():
        module = sys.modules.get(f"{config.name}.mcp")
        for value in vars(module).values() if module is not None else ():
            if isinstance(value, MCPServer):
                found.setdefault(value.key, value)
    return found


def resolve_server(spec: str | None) -> MCPServer:
    """``None`` or ``mcp``: the default server; a dotted path: that object; otherwise a server's name."""
    if not spec or spec == "mcp":
        return mcp
    if "." in spec:
        try:
            value = import_string(spec)
        except ImportError as exc:
            raise CommandError(f"cannot import {spec!r}: {exc}") from exc
        if not isinstance(value, MCPServer):
            raise CommandError(f"{spec!r} is a {type(value).__name__}, not an MCPServer")
        return value
    servers = known_servers()
    if spec not in servers:
        names = ", ".join(sorted(servers))
        raise CommandError(f"no MCP server named {spec!r} (known: {names}); or pass a dotted path")
    return servers[spec]


def resolve_user(username: str | None) -> Any:
    """The active user named ``username`` (its permissions apply to every request), or anonymous."""
    if not username:
        return AnonymousUser()
    model = get_user_model()
    try:
        user = model._default_manager.get_by_natural_key(username)
    except model.DoesNotExist:
        raise CommandError(f"no user named {username!r}") from None
    if not user.is_active:
        raise CommandError(f"user {username!r} is inactive")
    return user


def route_logging(level: str | None, stream: TextIO) -> None:
    """Point every logging handler that writes to stdout at ``stream``; set mcp_server's ``level``."""
    loggers = [logging.getLogger(), *(logging.getLogger(name) for name in logging.root.manager.loggerDict)]
    for each in loggers:
        for handler in each.handlers:
            if isinstance(handler, logging.StreamHandler) and handler.stream in (sys.stdout, sys.__stdout__):
                handler.setStream(stream)
    if level:
        ours = logging.getLogger("mcp_server")
        ours.setLevel(level)
        if not ours.hasHandlers():
            handler = logging.StreamHandler(stream)
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
            ours.addHandler(handler)


@contextmanager
def claim_stdio() -> Iterator[tuple[int, IO[bytes]]]:
    """Keep the real stdin and stdout for the protocol; point fds 0 and 1 at /dev/null and stderr for the
    rest of the process.

    Output still buffered in ``sys.stdout`` (an app's ``print`` at import time) goes to stderr as well.
    """
    protocol_in = os.dup(0)
    protocol_out = os.dup(1)
    os.dup2(2, 1)
    if sys.stdout is not None:
        sys.stdout.flush()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    saved_stdout = sys.stdout
    sys.stdout = sys.stderr
    output = os.fdopen(protocol_out, "wb")
    try:
        yield protocol_in, output
    finally:
        sys.stdout = saved_stdout
        with suppress(OSError):
            output.close()


class Command(BaseCommand):
    help = "Serve MCP over stdin/stdout (newline-delimited JSON-RPC) for desktop clients."

    def __init__(self, stdout: TextIO | None = None, *args: Any, **kwargs: Any) -> None:
        # stdout belongs to the protocol: the command's own messages (system checks) go to stderr.
        super().__init__(stdout if stdout is not None else sys.stderr, *args, **kwargs)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--server",
            default=None,
            help="The MCP server to serve: a dotted path (myapp.mcp.support) or a server's name "
            "(default: the default server, mcp_server.mcp).",
        )
        parser.add_argument(
            "--user",
            default=None,
            help="Username whose permissions apply to every request (default: anonymous, which "
            "MCP_SERVER['ALLOW_ANONYMOUS'] = False refuses unless --allow-anonymous is given).",
        )
        parser.add_argument(
            "--allow-anonymous",
            action="store_true",
            help="Serve anonymously without --user even though MCP_SERVER['ALLOW_ANONYMOUS'] is False.",
        )
        parser.add_argument(
            "--log-level",
            default=None,
            type=str.upper,
            choices=LOG_LEVELS,
            help="Level of the mcp_server loggers (default: as LOGGING says). Logs always go to stderr.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        server = resolve_server(options["server"])
        if not options["user"] and not mcp_settings.ALLOW_ANONYMOUS and not options["allow_anonymous"]:
            raise CommandError(
                "MCP_SERVER['ALLOW_ANONYMOUS'] is False, so mcp_stdio will not serve anonymously: pass "
                "--user USERNAME (the user whose permissions apply to every request), or --allow-anonymous "
                "to serve anonymously anyway."
            )
        user = resolve_user(options["user"])
        route_logging(options["log_level"], sys.stderr)
        from mcp_server.updates import watch_registry

        watch_registry(server)
        with claim_stdio() as (input_fd, output):
            run(server, user=user, input_fd=input_fd, output=output)
        _exit_if_handlers_linger()


def run(server: MCPServer, *, user: Any, input_fd: int, output: IO[bytes]) -> str:
    """Serve one session on its own event loop; SIGTERM and SIGINT wind it down as end of input does."""
    from mcp_server.runtime import get_runtime
    from mcp_server.transports.stdio import StdioLoop

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    handlers = ThreadPoolExecutor(thread_name_prefix=HANDLER_THREADS)  # sync handlers run here
    loop.set_default_executor(handlers)

    async def main() -> str:
        runtime = get_runtime()
        session = StdioLoop(
            server,
            runtime=runtime,
            input_fd=input_fd,
            output=output,
            user=user,
            grace=float(mcp_settings.SHUTDOWN_GRACE),
        )
        for signum in (signal.SIGTERM, signal.SIGINT):
            with suppress(NotImplementedError, RuntimeError):  # Windows, or not the main thread
                loop.add_signal_handler(signum, session.stop, "server shutting down")
        try:
            return await session.run()
        finally:
            await runtime.aclose()  # the ledger's last records are written before the process ends
            await sync_to_async(connections.close_all)()

    try:
        reason = loop.run_until_complete(main())
        logger.info("stdio server stopped: %s", reason)
        _cancel_leftovers(loop)
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        handlers.shutdown(wait=False, cancel_futures=True)
        asyncio.set_event_loop(None)
        loop.close()
    return reason


def _cancel_leftovers(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel background tasks (ledger upkeep, handlers past the grace) and give them a moment to end."""
    tasks = asyncio.all_tasks(loop)
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.wait(tasks, timeout=1.0))


def _exit_if_handlers_linger(wait: float = 1.0) -> None:
    """A sync handler (or a write to a client that stopped reading) still blocking a thread would hold the
    interpreter's exit for ever: past ``wait`` seconds, exit 0 without it."""
    deadline = time.monotonic() + wait
    busy = [t for t in threading.enumerate() if t.name.startswith((HANDLER_THREADS, "mcp-stdout"))]
    for thread in busy:
        thread.join(max(0.0, deadline - time.monotonic()))
    if any(thread.is_alive() for thread in busy):
        logger.warning("handler threads still running after the grace period; exiting without them")
        logging.shutdown()
        sys.stderr.flush()
        os._exit(0)
