"""The admin's live view of pending requests, and the operator actions behind it.

- :mod:`.operations`: abort requests (-32003) and end sessions (-32000), through the one settle path.
- :mod:`.snapshot`: what the live page shows (pending requests, the last hour by minute).
- :mod:`.consumer`: the page's WebSocket, for staff with the view permission only.
- :mod:`.routing`: its URL pattern; :mod:`.views`: the page and its abort endpoint.
"""

from __future__ import annotations

__all__: list[str] = []
