"""System checks for authentication, OAuth metadata and the ASGI routing (ids listed in the README).

- ``mcp_server.E007`` an ``AUTHENTICATION_CLASSES`` entry cannot be imported or is no authentication class
- ``mcp_server.E008`` ``ALLOW_ANONYMOUS`` is not a boolean
- ``mcp_server.E009`` ``OAUTH_AUTHORIZATION_SERVERS`` is not a list of absolute URLs (``https``, or ``http``
  on a loopback host), or ``OAUTH_RESOURCE_METADATA`` is not a dict
- ``mcp_server.W003`` ``ASGI_APPLICATION`` is unset, cannot be imported, or routes no MCP endpoint
- ``mcp_server.W004`` ``ALLOW_ANONYMOUS`` is off and no authentication class is listed: nobody can connect
- ``mcp_server.W005`` an OAuth authorization server is configured but ``ALLOW_ANONYMOUS`` is on, so clients
  without a token are served anonymously and never sent to it
- ``mcp_server.W036`` a SQLite database begins its transactions deferred, or waits less than 5 s for its write
  lock (``OPTIONS``: ``transaction_mode``, ``timeout``)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.utils.module_loading import import_string

from .conf import MCPSettings

__all__ = [
    "SQLITE_OPTIONS",
    "check_asgi_routing",
    "check_authentication",
    "check_sqlite_options",
    "routed_servers",
]

LOOPBACK = {"localhost", "127.0.0.1", "::1"}
_FOLLOW = ("application_mapping", "routes", "callback", "inner", "app", "application")


def _children(node: Any) -> Iterator[Any]:
    for attribute in _FOLLOW:
        child = getattr(node, attribute, None)
        if child is None or child is node:
            continue
        if isinstance(child, dict):
            yield from child.values()
        elif isinstance(child, list | tuple):
            yield from child
        else:
            yield child


def routed_servers(application: Any) -> list[Any]:
    """The ``MCPServer`` objects an ASGI application routes to (through routers and middleware)."""
    from .transports.consumer import MCPConsumer

    found: list[Any] = []
    seen: set[int] = set()
    stack = [application]
    while stack and len(seen) < 10_000:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        consumer = getattr(node, "consumer_class", None)
        if isinstance(consumer, type) and issubclass(consumer, MCPConsumer):
            server = (getattr(node, "consumer_initkwargs", None) or {}).get("server")
            if server is not None and server not in found:
                found.append(server)
            continue
        stack.extend(_children(node))
    return found


@register(Tags.compatibility)
def check_authentication(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Validate ``AUTHENTICATION_CLASSES``, ``ALLOW_ANONYMOUS`` and the OAuth settings."""
    if not isinstance(getattr(settings, "MCP_SERVER", {}), dict):
        return []  # E000 says so
    from .auth import load_authenticator

    conf = MCPSettings.from_django()
    messages: list[CheckMessage] = []
    classes = conf.AUTHENTICATION_CLASSES
    if not isinstance(classes, list | tuple) or not all(isinstance(c, str) for c in classes):
        messages.append(
            Error(
                "MCP_SERVER['AUTHENTICATION_CLASSES'] must be a list of import paths.", id="mcp_server.E007"
            )
        )
        classes = []
    for path in classes:
        try:
            load_authenticator(path)
        except Exception as exc:
            messages.append(
                Error(
                    f"MCP_SERVER['AUTHENTICATION_CLASSES'] entry {path!r} is unusable: {exc}",
                    hint="Subclass mcp_server.auth.BaseAuthentication, or name a DRF authentication class.",
                    id="mcp_server.E007",
                )
            )
    if not isinstance(conf.ALLOW_ANONYMOUS, bool):
        messages.append(Error("MCP_SERVER['ALLOW_ANONYMOUS'] must be True or False.", id="mcp_server.E008"))
    elif not conf.ALLOW_ANONYMOUS and not classes:
        messages.append(
            Warning(
                "MCP_SERVER['ALLOW_ANONYMOUS'] is False and no authentication class is listed: every request "
                "to the MCP endpoints will be refused with 401.",
                id="mcp_server.W004",
            )
        )
    messages += _check_oauth(conf)
    return messages


def _check_oauth(conf: MCPSettings) -> list[CheckMessage]:
    messages: list[CheckMessage] = []
    issuers = conf.OAUTH_AUTHORIZATION_SERVERS
    if not isinstance(issuers, list | tuple):
        issuers = [issuers]
    for issuer in issuers:
        parts = urlsplit(issuer) if isinstance(issuer, str) else None
        secure = parts is not None and (
            parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in LOOPBACK)
        )
        if parts is None or not parts.netloc or not secure or parts.query or parts.fragment:
            messages.append(
                Error(
                    f"MCP_SERVER['OAUTH_AUTHORIZATION_SERVERS'] entry {issuer!r} is not an issuer URL.",
                    hint="An absolute https URL without query or fragment (http only on a loopback host).",
                    id="mcp_server.E009",
                )
            )
    if not isinstance(conf.OAUTH_RESOURCE_METADATA, dict):
        messages.append(Error("MCP_SERVER['OAUTH_RESOURCE_METADATA'] must be a dict.", id="mcp_server.E009"))
    if issuers and conf.ALLOW_ANONYMOUS is True:
        messages.append(
            Warning(
                "MCP_SERVER['OAUTH_AUTHORIZATION_SERVERS'] is set but ALLOW_ANONYMOUS is True: clients "
                "without a token are served anonymously and never sent to the authorization server.",
                hint="Set MCP_SERVER['ALLOW_ANONYMOUS'] = False.",
                id="mcp_server.W005",
            )
        )
    return messages


@register(Tags.compatibility)
def check_asgi_routing(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Warn when the site's ASGI application does not route any MCP endpoint."""
    hint = (
        "In asgi.py: application = mcp_application(get_asgi_application()), or add *mcp_urlpatterns() to the "
        "HTTP routes of your ProtocolTypeRouter; set ASGI_APPLICATION to it."
    )
    path = getattr(settings, "ASGI_APPLICATION", None)
    if not path:
        return [
            Warning("ASGI_APPLICATION is not set; MCP is served over ASGI.", hint=hint, id="mcp_server.W003")
        ]
    try:
        application = import_string(path)
    except Exception as exc:
        return [
            Warning(f"ASGI_APPLICATION {path!r} cannot be imported: {exc}", hint=hint, id="mcp_server.W003")
        ]
    if not routed_servers(application):
        return [
            Warning(f"ASGI_APPLICATION {path!r} routes no MCP endpoint.", hint=hint, id="mcp_server.W003")
        ]
    return []


SQLITE_OPTIONS = {
    "transaction_mode": "IMMEDIATE",
    "timeout": 20,
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
}
"""The SQLite ``OPTIONS`` the README's setup shows (W036)."""


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
                hint=f"Set DATABASES[{alias!r}]['OPTIONS'] = {SQLITE_OPTIONS!r} (README: Writes and the "
                "guarantee), or write through mcp_server.write_transaction.",
                id="mcp_server.W036",
            )
            for problem in problems
        ]
    return messages
