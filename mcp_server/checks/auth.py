"""Checks of authentication and the OAuth metadata.

- ``mcp_server.E007`` an ``AUTHENTICATION_CLASSES`` entry cannot be imported or is no authentication class
- ``mcp_server.E008`` ``ALLOW_ANONYMOUS`` is not a boolean
- ``mcp_server.E009`` ``OAUTH_AUTHORIZATION_SERVERS`` is not a list of absolute URLs (``https``, or ``http``
  on a loopback host), or ``OAUTH_RESOURCE_METADATA`` is not a dict
- ``mcp_server.W004`` ``ALLOW_ANONYMOUS`` is off and no authentication class is listed: nobody can connect
- ``mcp_server.W005`` an OAuth authorization server is configured but ``ALLOW_ANONYMOUS`` is on, so clients
  without a token are served anonymously and never sent to it

(The checks of the site as an OAuth authorization server, ``E06x``/``W06x``, are in
:mod:`mcp_server.oauth.checks`, registered by that app.)
"""

from __future__ import annotations

from urllib.parse import urlsplit

from django.core.checks import CheckMessage, Error, Warning

from ..conf import MCPSettings
from .base import mcp_check

__all__ = ["LOOPBACK", "check_authentication"]


LOOPBACK = {"localhost", "127.0.0.1", "::1"}


@mcp_check
def check_authentication(conf: MCPSettings) -> list[CheckMessage]:
    """Validate ``AUTHENTICATION_CLASSES``, ``ALLOW_ANONYMOUS`` and the OAuth settings."""
    from ..auth import load_authenticator

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
