"""ASGI entry point: the MCP endpoint at /mcp, everything else served by Django."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
django_application = get_asgi_application()

from mcp_server.routing import mcp_application  # noqa: E402  (after Django is set up)

application = mcp_application(django_application)
