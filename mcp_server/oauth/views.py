"""DOT's views, narrowed for MCP clients: metadata, registration and the consent page."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode, urlsplit

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.decorators import method_decorator
from django.views.decorators.clickjacking import xframe_options_deny
from oauth2_provider.exceptions import OAuthToolkitError
from oauth2_provider.models import get_application_model
from oauth2_provider.settings import oauth2_settings
from oauth2_provider.views import AuthorizationView, OAuthServerMetadataView, TokenView
from oauth2_provider.views.dynamic_client_registration import (
    DynamicClientRegistrationManagementView,
    DynamicClientRegistrationView,
)
from oauthlib.oauth2.rfc6749.errors import CustomOAuth2Error

from .cimd import is_cimd_client_id, refusal
from .connections import identity_of
from .grace import RefreshGrace, authenticated_client, replayed, still_live
from .redirects import LOOPBACK_HOSTS, redirect_problem
from .resources import canonical, endpoint_icons, endpoint_title, site_resources
from .scopes import describe
from .throttle import throttled

__all__ = ["MAX_REGISTRATION_BYTES", "ConsentView", "RegistrationView", "ServerMetadataView"]

MAX_REGISTRATION_BYTES = 16 * 1024
"""A client registration's metadata larger than this is refused (real clients send under 2 KB)."""


GRANTS = {"authorization_code", "refresh_token"}


def _error(error: str, description: str, status: int = 400) -> JsonResponse:
    return JsonResponse({"error": error, "error_description": description}, status=status)


class ServerMetadataView(OAuthServerMetadataView):  # type: ignore[misc]
    """RFC 8414 metadata; advertises only what the server does (no introspection; CIMD when it is on)."""

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = super().get(request, *args, **kwargs)
        data = json.loads(response.content)
        data["issuer"] = request.build_absolute_uri("/").rstrip("/")
        data["authorization_response_iss_parameter_supported"] = True
        data["code_challenge_methods_supported"] = ["S256"]
        if _cimd_offered():
            data["client_id_metadata_document_supported"] = True
        else:
            data.pop("client_id_metadata_document_supported", None)
        for key in ("introspection_endpoint", "introspection_endpoint_auth_methods_supported"):
            data.pop(key, None)
        out = JsonResponse(data)
        out["Access-Control-Allow-Origin"] = "*"
        out["Cache-Control"] = "max-age=300"
        return out


def _cimd_offered() -> bool:
    from ..conf import mcp_settings

    return bool(oauth2_settings.CIMD_ENABLED) and mcp_settings.OAUTH_CIMD_HOSTS != []


def _metadata_problem(request: HttpRequest) -> JsonResponse | None:
    """Why a registration's metadata is refused (size, JSON, redirect URIs, grants, name), or ``None``."""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length > MAX_REGISTRATION_BYTES or len(request.body) > MAX_REGISTRATION_BYTES:
        return _error("invalid_client_metadata", f"Client metadata over {MAX_REGISTRATION_BYTES} bytes", 413)
    try:
        data = json.loads(request.body)
    except (ValueError, UnicodeDecodeError):
        return _error("invalid_client_metadata", "Request body must be a JSON object")
    if not isinstance(data, dict):
        return _error("invalid_client_metadata", "Request body must be a JSON object")
    uris = data.get("redirect_uris")
    if not isinstance(uris, list) or not uris:
        return _error("invalid_redirect_uri", "redirect_uris must be a non-empty array of URIs")
    for uri in uris:
        problem = redirect_problem(uri)
        if problem:
            return _error("invalid_redirect_uri", problem)
    grants = data.get("grant_types", ["authorization_code"])
    if not isinstance(grants, list) or "authorization_code" not in grants or not set(grants) <= GRANTS:
        return _error("invalid_client_metadata", "grant_types may be authorization_code and refresh_token")
    name = data.get("client_name", "")
    if not isinstance(name, str) or len(name) > 255:
        return _error("invalid_client_metadata", "client_name must be a string of at most 255 characters")
    return None


class RegistrationView(DynamicClientRegistrationView):  # type: ignore[misc]
    """RFC 7591 registration, open to anyone, with the metadata checked first (:func:`_metadata_problem`)."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        refused = throttled(request, "register") or _metadata_problem(request)
        if refused is not None:
            return refused
        response: HttpResponse = super().post(request, *args, **kwargs)
        return response


class RegistrationManagementView(DynamicClientRegistrationManagementView):  # type: ignore[misc]
    """RFC 7592 (read, update, delete with the registration token); an update is checked as a registration."""

    def put(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        refused = _metadata_problem(request)
        if refused is not None:
            return refused
        response: HttpResponse = super().put(request, *args, **kwargs)
        return response


def _grant_type_problem(request: HttpRequest) -> JsonResponse | None:
    """RFC 6749's ``unsupported_grant_type`` for a grant the metadata does not advertise, before DOT runs:
    its handlers of the others (the device flow's, say) are not this server's, and some fail on bad input."""
    if request.POST.get("grant_type") in oauth2_settings.OAUTH2_GRANT_TYPES_SUPPORTED:
        return None
    return _error("unsupported_grant_type", "grant_type must be one of the server's grant_types_supported")


class ThrottledTokenView(TokenView):  # type: ignore[misc]
    """DOT's token endpoint behind ``OAUTH_THROTTLE["token"]``, with the refresh grace window
    (:mod:`mcp_server.oauth.grace`, ``OAUTH_REFRESH_GRACE``)."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        refused = throttled(request, "token") or _grant_type_problem(request)
        if refused is not None:
            return refused
        plain = request.POST.get("refresh_token")
        if request.POST.get("grant_type") == "refresh_token" and plain:  # one at a time, even without grace
            return self._refresh(request, plain, *args, **kwargs)
        response: HttpResponse = super().post(request, *args, **kwargs)
        return response

    def _refresh(self, request: HttpRequest, plain: str, *args: Any, **kwargs: Any) -> HttpResponse:
        """One refresh of ``plain`` at a time; a second one inside the window gets the first's answer."""
        grace = RefreshGrace(plain)
        try:
            kept = grace.acquire()
            if kept is not None:
                if authenticated_client(self, request) == kept[0] and still_live(kept[1]):
                    return replayed(kept[1])
                grace.forget()  # another client, or a grant revoked since: DOT refuses (and revokes)
            response: HttpResponse = super().post(request, *args, **kwargs)
            if response.status_code == 200:
                grace.keep(authenticated_client(self, request) or "", response)
            return response
        finally:
            grace.release()


def _grant_problem(request: HttpRequest, resources: list[str]) -> str | None:
    known = site_resources(request)
    for resource in resources:
        if canonical(resource) not in known:
            return f"The resource {resource!r} is not an MCP endpoint of this site"
    return None


@method_decorator(xframe_options_deny, name="dispatch")
class ConsentView(AuthorizationView):  # type: ignore[misc]
    """The authorize step: the person signs in (``LOGIN_URL``), then allows or denies on this page.

    ``resource`` (RFC 8707) must name one of the site's MCP endpoints; when absent and the site has one,
    that one. The template ``mcp_server/oauth/consent.html`` can be overridden.
    """

    template_name = "mcp_server/oauth/consent.html"

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response: HttpResponse = super().dispatch(request, *args, **kwargs)
        response["Content-Security-Policy"] = "frame-ancestors 'none'"
        response["Cache-Control"] = "no-store"
        return response

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            _scopes, credentials = self.validate_authorization_request(request)
        except OAuthToolkitError as failure:
            client_id = request.GET.get("client_id", "")
            if is_cimd_client_id(client_id) and not _known(client_id):
                why = {"error": "invalid_client", "description": refusal(client_id)}
                refused: HttpResponse = self.render_to_response({"error": why}, status=400)
                return refused
            shown: HttpResponse = self.error_response(failure, application=None)  # renders, never redirects
            return shown
        if (
            credentials.get("code_challenge_method", "plain") != "S256"
        ):  # DOT refuses plain only after consent
            return self._refuse(credentials, "invalid_request", "code_challenge_method must be S256")
        resources = request.GET.getlist("resource")
        if not resources:
            known = site_resources(request)
            if len(known) != 1:
                return self._refuse(
                    credentials, "invalid_target", "resource is required: this site has several"
                )
            query = request.GET.copy()
            query.setlist("resource", known)
            request.GET = query  # type: ignore[assignment]
        else:
            problem = _grant_problem(request, resources)
            if problem:
                return self._refuse(credentials, "invalid_target", problem)
        page: HttpResponse = super().get(request, *args, **kwargs)
        return page

    def _refuse(self, credentials: dict[str, Any], error: str, description: str) -> HttpResponse:
        application = get_application_model().objects.get(client_id=credentials["client_id"])
        failure = OAuthToolkitError(
            error=CustomOAuth2Error(error=error, description=description, state=credentials.get("state")),
            redirect_uri=credentials["redirect_uri"],
        )
        response: HttpResponse = self.error_response(failure, application)
        return response

    def error_response(self, error: Any, application: Any, **kwargs: Any) -> HttpResponse:
        """DOT's, with ``iss`` in an error sent back to the client too (RFC 9207 section 2)."""
        response: HttpResponse = super().error_response(error, application, **kwargs)
        location = response.get("Location")
        if response.status_code == 302 and location and "iss=" not in urlsplit(location).query:
            issuer = oauth2_settings.oauth2_authorization_server_issuer(self.request)
            separator = "&" if "?" in location else "?"
            response["Location"] = location + separator + urlencode({"iss": issuer})
        return response

    def form_valid(self, form: Any) -> HttpResponse:
        data = form.cleaned_data
        application = get_application_model().objects.filter(client_id=data.get("client_id")).first()
        redirect_uri = data.get("redirect_uri") or ""
        if application is None or not application.redirect_uri_allowed(redirect_uri):
            return _error("invalid_request", "Unknown client or unregistered redirect_uri")
        problem = _grant_problem(self.request, (data.get("resource") or "").split())
        if problem or not data.get("resource"):
            return _error("invalid_target", problem or "resource is required")
        if not data.get("allow"):
            params = {"error": "access_denied", "error_description": "The person denied access"}
            if data.get("state"):
                params["state"] = data["state"]
            params["iss"] = oauth2_settings.oauth2_authorization_server_issuer(self.request)
            separator = "&" if "?" in redirect_uri else "?"
            response: HttpResponse = self.redirect(redirect_uri + separator + urlencode(params), application)
            return response
        allowed: HttpResponse = super().form_valid(form)
        return allowed

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context: dict[str, Any] = super().get_context_data(**kwargs)
        redirect = urlsplit(str(context.get("redirect_uri") or ""))
        resource = (str(context.get("resource") or "").split() or [""])[0]
        path = urlsplit(resource).path
        context.update(
            redirect_scheme=redirect.scheme,
            redirect_host=redirect.hostname or redirect.netloc or redirect.scheme,
            redirect_loopback=redirect.hostname in LOOPBACK_HOSTS,
            redirect_custom=redirect.scheme not in {"http", "https"},
            server_title=endpoint_title(path) or resource,
            server_icon=_shown_icon(endpoint_icons(path)),
            resource_url=resource,
            access=[describe(s) for s in context.get("scopes") or []],
            **_identity(context.get("application")),
        )
        return context


def _known(client_id: str) -> bool:
    return bool(get_application_model().objects.filter(client_id=client_id).exists())


def _identity(application: Any) -> dict[str, str]:
    """The consent page's ``identity`` (cimd, dcr, manual) and ``identity_host``."""
    source, host = identity_of(application)
    return {"identity": source, "identity_host": host}


def _shown_icon(icons: list[dict[str, Any]]) -> str:
    """The ``src`` of the first icon a browser may load from this page (https, or an image data URI)."""
    for icon in icons:
        src = str(icon.get("src") or "")
        if src.startswith(("https://", "data:image/png;", "data:image/jpeg;", "data:image/webp;")):
            return src
    return ""
