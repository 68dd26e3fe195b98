"""The person's *Connected apps* page: the apps they allowed, and a Revoke button for each.

``/oauth/apps/`` lists them (sign-in required: ``LOGIN_URL``); ``POST /oauth/apps/<id>/revoke/``
(CSRF-protected) revokes every token of that app the person holds. The template
``mcp_server/oauth/connected_apps.html`` can be overridden; it is in the admin's look, like the consent page.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.mixins import LoginRequiredMixin
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.decorators import method_decorator
from django.views.decorators.cache import never_cache
from django.views.decorators.clickjacking import xframe_options_deny
from django.views.generic import TemplateView, View

from .connections import connections_of, revoke_connections

__all__ = ["ConnectedAppsView", "RevokeConnectedAppView"]


@method_decorator([never_cache, xframe_options_deny], name="dispatch")
class ConnectedAppsView(LoginRequiredMixin, TemplateView):
    """The apps the signed-in person connected: client, identity, connected, last used, access, endpoints."""

    template_name = "mcp_server/oauth/connected_apps.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context: dict[str, Any] = super().get_context_data(**kwargs)
        context.update(connections=connections_of(self.request.user), title="Connected apps")
        return context


@method_decorator([never_cache, xframe_options_deny], name="dispatch")
class RevokeConnectedAppView(LoginRequiredMixin, View):
    """Revoke one app of the signed-in person (POST only; Django's CSRF middleware guards it)."""

    http_method_names = ["post"]

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        mine = {c.application.pk: c.application for c in connections_of(request.user)}
        application = mine.get(pk)
        if application is None:
            messages.error(request, "That app is not connected to your account.")
        else:
            revoke_connections([pk], user=request.user)
            name = application.name or application.client_id
            messages.success(request, f"Revoked {name}: it can no longer use this site as you.")
        return HttpResponseRedirect(reverse("oauth2_provider:connected-apps"))
