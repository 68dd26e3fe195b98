"""URLs of the site's authorization server: ``path("", include("mcp_server.oauth.urls"))``.

``/.well-known/oauth-authorization-server`` (RFC 8414; the issuer is the site's origin, so this is also
its path-inserted form), ``/oauth/authorize/`` (sign-in and consent), ``/oauth/token/``,
``/oauth/revoke/`` (RFC 7009), ``/oauth/register/`` (RFC 7591) and ``/oauth/apps/`` (the signed-in
person's connected apps, each with a Revoke button). Protected Resource Metadata (RFC 9728)
is served by the MCP routing itself, per endpoint.
"""

from __future__ import annotations

from django.urls import URLPattern, path
from oauth2_provider import views as dot

from . import connected, views

app_name = "oauth2_provider"  # DOT reverses its endpoints under this namespace

urlpatterns: list[URLPattern] = [
    path(
        ".well-known/oauth-authorization-server",
        views.ServerMetadataView.as_view(),
        name="oauth-server-metadata",
    ),
    path("oauth/authorize/", views.ConsentView.as_view(), name="authorize"),
    path("oauth/token/", views.ThrottledTokenView.as_view(), name="token"),
    path("oauth/revoke/", dot.RevokeTokenView.as_view(), name="revoke-token"),
    path("oauth/register/", views.RegistrationView.as_view(), name="dcr-register"),
    path("oauth/apps/", connected.ConnectedAppsView.as_view(), name="connected-apps"),
    path(
        "oauth/apps/<int:pk>/revoke/",
        connected.RevokeConnectedAppView.as_view(),
        name="connected-app-revoke",
    ),
    path(
        "oauth/register/<str:client_id>/",
        views.RegistrationManagementView.as_view(),
        name="dcr-register-management",
    ),
]
