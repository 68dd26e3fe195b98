"""URLs of the demo site."""

import shlex
import sys

from django.apps import apps
from django.conf import settings
from django.contrib import admin
from django.contrib.auth.views import LoginView
from django.urls import include, path
from django.views.generic import TemplateView
from rest_framework.routers import DefaultRouter

from project.catalogue.api import BookViewSet

api = DefaultRouter()
api.register("books", BookViewSet, basename="book")

MANAGE = f"{shlex.quote(sys.executable)} {shlex.quote(str(settings.BASE_DIR / 'manage.py'))}"
"""``manage.py`` as the home page shows it: the site's own interpreter and absolute paths, so the commands
work from any directory, with or without the virtualenv activated."""

urlpatterns = [
    path(
        "",
        TemplateView.as_view(
            template_name="home.html",
            extra_context={"manage": MANAGE, "oauth": apps.is_installed("mcp_server.oauth")},
        ),
        name="home",
    ),
    path("admin/", admin.site.urls),
    path("api/", include(api.urls)),  # the same viewset the MCP tools catalogue_books_* run
    path("", include("mcp_server.metrics.urls")),  # /metrics for Prometheus (loopback only: settings.py)
]

if apps.is_installed("mcp_server.oauth"):  # the site as OAuth authorization server (project/settings.py)
    urlpatterns += [
        path("", include("mcp_server.oauth.urls")),
        # LOGIN_URL: any user of the site signs in here (the admin's login is for staff only)
        path("accounts/login/", LoginView.as_view(template_name="admin/login.html"), name="login"),
    ]
