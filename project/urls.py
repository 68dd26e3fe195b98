"""URLs of the demo site."""

import shlex
import sys

from django.conf import settings
from django.contrib import admin
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
    path("", TemplateView.as_view(template_name="home.html", extra_context={"manage": MANAGE}), name="home"),
    path("admin/", admin.site.urls),
    path("api/", include(api.urls)),  # the same viewset the MCP tools catalogue_books_* run
]
