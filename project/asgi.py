"""ASGI entry point: MCP at /mcp, /staff/mcp and /conformance/mcp; everything else served by Django.

In DEBUG, ``mcp_application`` serves static files too (the admin's CSS, the live page's script); in production
WhiteNoise does (``project.settings``).
"""

import os
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
django_application: Any = get_asgi_application()

from mcp_server import mcp  # noqa: E402  (after Django is set up)
from mcp_server.routing import mcp_application  # noqa: E402
from project.mcp_servers import conformance, staff  # noqa: E402

application = mcp_application(
    django_application, servers={"mcp": mcp, "staff/mcp": staff, "conformance/mcp": conformance}
)
