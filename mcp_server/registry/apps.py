"""MCP Apps views: a Django template served as a ``ui://`` resource that a tool names (SEP-1865).

``@mcp.tool(app="catalogue/book_cards.html")`` registers the template as the resource
``ui://<server name>/catalogue/book_cards.html`` (once, however many tools share it) and sets the tool's
``_meta.ui.resourceUri``. The host reads the resource (``resources/read``) and renders the document in a
sandboxed iframe; the document gets the tool's input and result from the host over ``postMessage``, never
from the site (see ``mcp_server/static/mcp_server/apps/bridge.js``).

The template is rendered with Django's autoescaping and without a ``RequestContext``: no context processor
runs, so the document carries no CSRF token and reads no session. Its context is :func:`view_context`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from django.contrib.auth.models import AnonymousUser
from django.template.loader import get_template

from ..conf import django_setting, mcp_settings
from ..core.context import Context
from ..wire.apps import APP_MIME_TYPE, UI_SCHEME, VISIBILITIES
from .entries import Permission
from .resources import Resource
from .signature import call_handler

if TYPE_CHECKING:
    from django.http import HttpRequest

__all__ = [
    "CSP_KEYS",
    "PERMISSION_KEYS",
    "App",
    "AppResource",
    "check_visibility",
    "derived_csp",
    "site_origin",
    "view_context",
]

CSP_KEYS = ("connectDomains", "resourceDomains", "frameDomains", "baseUriDomains")
"""The keys of ``_meta.ui.csp``."""

PERMISSION_KEYS = ("camera", "microphone", "geolocation", "clipboardWrite")
"""The keys of ``_meta.ui.permissions`` (each ``{}`` when asked for)."""


@dataclass(frozen=True)
class App:
    """A view: ``@mcp.tool(app=App("catalogue/book_cards.html", prefers_border=True))``.

    ``template``: the Django template. ``name``: the URI's path (default: the template's name), so the URI
    is ``ui://<server name>/<name>``. ``csp`` replaces the derived ``_meta.ui.csp`` (see
    :func:`derived_csp`); ``permissions`` (``{"clipboardWrite": {}}``…), ``prefers_border`` and ``domain``
    are the resource's ``_meta.ui`` fields. ``permission`` guards ``resources/read`` of it as any resource's.
    """

    template: str
    name: str | None = None
    title: str | None = None
    description: str | None = None
    csp: dict[str, list[str]] | None = None
    permissions: dict[str, dict[str, Any]] | None = None
    prefers_border: bool | None = None
    domain: str | None = None
    permission: Permission = None

    def __post_init__(self) -> None:
        name = self.name or self.template
        if not name or "{" in name or "}" in name:
            raise TypeError(f"app {self.template!r}: its name must be non-empty and hold no braces")
        check_csp(self.csp, f"app {self.template!r}")
        unknown = set(self.permissions or {}) - set(PERMISSION_KEYS)
        if unknown:
            raise TypeError(f"app {self.template!r}: unknown permissions {sorted(unknown)}")

    def uri(self, server_name: str) -> str:
        """The view's ``ui://`` URI on the server named ``server_name``."""
        return f"{UI_SCHEME}{server_name}/{self.name or self.template}"


def check_csp(csp: Any, owner: str) -> None:
    """Raise ``TypeError`` unless ``csp`` is ``None`` or a dict of :data:`CSP_KEYS` to lists of strings."""
    if csp is None:
        return
    if not isinstance(csp, Mapping) or set(csp) - set(CSP_KEYS):
        raise TypeError(f"{owner}: csp must be a dict with keys among {list(CSP_KEYS)}")
    for key, value in csp.items():
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise TypeError(f"{owner}: csp[{key!r}] must be a list of origins")


def check_visibility(visibility: Any, owner: str) -> list[str] | None:
    """``visibility`` as a list of :data:`VISIBILITIES` (``None`` stays ``None``); ``TypeError`` otherwise."""
    if visibility is None:
        return None
    if isinstance(visibility, str) or not visibility or not set(visibility) <= set(VISIBILITIES):
        raise TypeError(f"{owner}: visibility must be a non-empty list of {list(VISIBILITIES)}")
    return list(dict.fromkeys(visibility))


def _origin(url: str) -> str | None:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else None


def site_origin(request: HttpRequest | None) -> str | None:
    """The site's origin in views: ``APP_ORIGIN``, else the request's (``None`` without one: stdio)."""
    if mcp_settings.APP_ORIGIN:
        return str(mcp_settings.APP_ORIGIN).rstrip("/")
    if request is None:
        return None
    try:
        return f"{request.scheme}://{request.get_host()}"
    except Exception:  # a host Django refuses (DisallowedHost): no origin rather than a failed read
        return None


def absolute_url(url: str, origin: str | None) -> str:
    """``url`` (``STATIC_URL``, ``MEDIA_URL``) made absolute on ``origin`` when it is relative."""
    if _origin(url) is not None or origin is None:
        return url
    return f"{origin}/{url.lstrip('/')}"


def derived_csp(request: HttpRequest | None) -> dict[str, list[str]]:
    """``_meta.ui.csp`` from the settings: ``APP_CSP`` when set; else ``resourceDomains`` holds the origins
    ``STATIC_URL`` and ``MEDIA_URL`` point at (the site's own, :func:`site_origin`, for relative ones) and
    no ``connectDomains`` (the view talks to the host, not to the site)."""
    if mcp_settings.APP_CSP is not None:
        return {k: list(v) for k, v in mcp_settings.APP_CSP.items()}
    origin = site_origin(request)
    domains: list[str] = []
    for name in ("STATIC_URL", "MEDIA_URL"):
        url = django_setting(name)
        found = _origin(absolute_url(str(url), origin)) if url else None
        if found is not None and found not in domains:
            domains.append(found)
    return {"resourceDomains": domains} if domains else {}


def _no_handler(ctx: Context) -> str:  # pragma: no cover - AppResource.read renders the template instead
    raise NotImplementedError


@dataclass
class AppResource(Resource):
    """The ``ui://`` resource of an :class:`App`: ``resources/read`` renders its template."""

    app: App = field(default_factory=lambda: App("-"))

    def definition(self) -> dict[str, Any]:
        """As listed: the resource, with the ``_meta.ui`` fields that do not depend on the request."""
        out = super().definition()
        static = self.static_ui()
        if static:
            out["_meta"] = {**(out.get("_meta") or {}), "ui": static}
        return out

    def static_ui(self) -> dict[str, Any]:
        """``permissions``, ``prefersBorder`` and ``domain`` where the app sets them."""
        ui: dict[str, Any] = {}
        if self.app.permissions:
            ui["permissions"] = {k: dict(v) for k, v in self.app.permissions.items()}
        if self.app.prefers_border is not None:
            ui["prefersBorder"] = self.app.prefers_border
        if self.app.domain:
            ui["domain"] = self.app.domain
        return ui

    def ui_meta(self, request: HttpRequest | None) -> dict[str, Any]:
        """The contents' ``_meta.ui``: :meth:`static_ui` and the ``csp`` (the app's, else derived)."""
        csp = self.app.csp if self.app.csp is not None else derived_csp(request)
        return {"csp": csp, **self.static_ui()}

    async def read(self, uri: str, variables: dict[str, str], context: Any) -> dict[str, Any]:
        """Render the template (in a worker thread: a template may query the database)."""
        text = await call_handler(_render, self, context)
        meta = {"ui": self.ui_meta(context.request)}
        return {"contents": [{"uri": uri, "mimeType": APP_MIME_TYPE, "text": text, "_meta": meta}]}

    @classmethod
    def of(cls, app: App, uri: str) -> AppResource:
        """The resource serving ``app`` at ``uri``."""
        return cls(
            name=app.name or app.template,
            fn=_no_handler,
            uri=uri,
            title=app.title,
            description=app.description,
            mime_type=APP_MIME_TYPE,
            permission=app.permission,
            app=app,
        )


def view_context(resource: AppResource, ctx: Context) -> dict[str, Any]:
    """What a view's template is rendered with.

    ``request`` (the ``resources/read`` request; ``None`` over stdio), ``user`` (an ``AnonymousUser`` when
    nobody signed in), ``client`` (the client's ``clientInfo``: ``name``, ``version``), ``view`` (``uri``
    and ``tools``: the names of the tools that show it), ``site_origin`` (:func:`site_origin`),
    ``static_url`` and ``media_url`` (``STATIC_URL``, ``MEDIA_URL`` made absolute on that origin).
    """
    origin = site_origin(ctx.request)
    tools = getattr(ctx.server, "tools", {})
    return {
        "request": ctx.request,
        "user": ctx.user if ctx.user is not None else AnonymousUser(),
        "client": dict(ctx.session.client_info),
        "view": {
            "uri": resource.uri,
            "tools": [n for n, t in tools.items() if getattr(t, "ui_resource", None) == resource.uri],
        },
        "site_origin": origin,
        "static_url": absolute_url(str(django_setting("STATIC_URL") or ""), origin),
        "media_url": absolute_url(str(django_setting("MEDIA_URL") or ""), origin),
    }


def _render(resource: AppResource, ctx: Context) -> str:
    # No request handed to the template: a RequestContext would run the context processors (the CSRF token,
    # the session's messages); autoescaping stays on as in any Django template.
    return get_template(resource.app.template).render(view_context(resource, ctx))
