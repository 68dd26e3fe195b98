"""The stores every worker process shares, shaped as Django's session backends are: one package per kind of
store, each with its ``base`` (the interface), ``database`` and, where one is possible, ``cache`` backends,
and each chosen by the import path of its class in a setting, as ``SESSION_ENGINE`` chooses a session
backend:

- :mod:`.ledger`: the request ledger (``LEDGER_BACKEND``; :func:`~.ledger.get_ledger`)
- :mod:`.events`: the SSE events kept for ``Last-Event-ID`` (``EVENT_STORE_BACKEND``;
  :func:`~.events.get_event_store`)
- :mod:`.tasks`: the tasks of the tasks extension (``TASK_STORE_BACKEND``; :func:`~.tasks.new_task_store`;
  no cache store)

:mod:`.loading` is the one way a setting's path becomes a store class; it still accepts the paths from before
this package (``mcp_server.ledger.database.DatabaseLedger`` …), with a ``DeprecationWarning``.
"""
