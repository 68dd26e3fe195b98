"""Who may read ``/metrics``: ``MCP_SERVER["METRICS_ACCESS"]``, one of three forms.

- ``"staff"`` (the default): a signed-in, active staff user (the admin's session cookie). Anyone else: 403.
- ``{"token": "<secret>"}``: a request with ``Authorization: Bearer <secret>`` (compared in constant time),
  as Prometheus sends it with ``authorization: {credentials: ...}``. Without it, or with another: 401 with
  ``WWW-Authenticate: Bearer realm="metrics"``.
- ``{"ips": ["127.0.0.1", "::1", "10.0.0.0/8"]}``: a request from one of these addresses or networks (the
  connection's peer, the ASGI scope's ``client``: behind a proxy, run the server so that it reports the real
  client, or list the proxy). Anyone else: 403.

A value of any other shape is refused by ``mcp_server.E051``, and refuses everyone (403) while it is set.
"""

from __future__ import annotations

import hmac
import ipaddress
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponse

from ..conf import mcp_settings

__all__ = ["Access", "access_problem", "parse_access", "refusal"]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Access:
    """One of the three forms of ``METRICS_ACCESS``."""

    staff: bool = False
    token: str | None = None
    networks: tuple[Network, ...] = ()


def parse_access(value: Any) -> Access:
    """The access ``value`` grants; ``ValueError`` (saying why) for a value of no known form."""
    if value == "staff":
        return Access(staff=True)
    if not isinstance(value, dict) or len(value) != 1 or not ({"token", "ips"} & value.keys()):
        raise ValueError('must be "staff", {"token": "<secret>"} or {"ips": [addresses or networks]}')
    if "token" in value:
        token = value["token"]
        if not isinstance(token, str) or not token.strip() or token != token.strip():
            raise ValueError("the token must be a non-empty string without surrounding spaces")
        return Access(token=token)
    ips = value["ips"]
    if not isinstance(ips, list | tuple) or not ips or not all(isinstance(ip, str) for ip in ips):
        raise ValueError("ips must be a non-empty list of addresses or networks (strings)")
    networks = []
    for ip in ips:
        try:
            networks.append(ipaddress.ip_network(ip, strict=False))
        except ValueError:
            raise ValueError(f"{ip!r} is not an IP address or network") from None
    return Access(networks=tuple(networks))


def access_problem(value: Any) -> str | None:
    """Why ``value`` cannot be ``METRICS_ACCESS`` (``None``: it can)."""
    try:
        parse_access(value)
    except ValueError as exc:
        return str(exc)
    return None


def _text(status: int, text: str) -> HttpResponse:
    return HttpResponse(text + "\n", status=status, content_type="text/plain; charset=utf-8")


def _from(request: HttpRequest, networks: tuple[Network, ...]) -> bool:
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in network for network in networks)


def _bearer(request: HttpRequest, token: str) -> bool:
    scheme, _, given = str(request.META.get("HTTP_AUTHORIZATION", "")).partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


async def refusal(request: HttpRequest) -> HttpResponse | None:
    """The answer refusing ``request`` (403 or 401), or ``None`` when it may read the metrics."""
    try:
        access = parse_access(mcp_settings.METRICS_ACCESS)
    except ValueError:
        return _text(403, "Forbidden: MCP_SERVER['METRICS_ACCESS'] is not valid (manage.py check).")
    if access.staff:
        auser = getattr(request, "auser", None)  # AuthenticationMiddleware's
        user = await auser() if auser is not None else None
        if user is not None and user.is_active and user.is_staff:
            return None
        return _text(403, "Forbidden: the metrics are for staff.")
    if access.token is not None:
        if _bearer(request, access.token):
            return None
        response = _text(401, "Unauthorized: the metrics need their bearer token.")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    if _from(request, access.networks):
        return None
    return _text(403, "Forbidden: the metrics are not served to this address.")
