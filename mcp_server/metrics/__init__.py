"""``/metrics`` for Prometheus (the ``prometheus`` extra): the request metrics every worker records, and what
only the ledger can say, read from it at scrape time.

- :mod:`.urls`: the one URL pattern a site includes; :mod:`.views`: the view.
- :mod:`.access`: who may read it (``MCP_SERVER["METRICS_ACCESS"]``: staff, a token, or addresses).
- :mod:`.figures`: the ledger's figures (pending requests, open sessions, live tasks), read as the admin's
  live page reads them.
- :mod:`.exposition`: the text Prometheus reads (the only module that imports ``prometheus_client``), with
  ``prometheus_client``'s multiprocess mode when ``PROMETHEUS_MULTIPROC_DIR`` is set.
"""

from __future__ import annotations

__all__: list[str] = []
