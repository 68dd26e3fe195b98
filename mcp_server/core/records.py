"""The ledger record: one per request, from arrival until it is settled, and how its fields are stored.

What every layer needs of the ledger: the record (:class:`LedgerRecord`), its key (:func:`request_key`), the
refusal of a pending duplicate (:class:`DuplicateRequest`) and what any backend can hold (:func:`storable`).
The stores themselves, and their base class :class:`~mcp_server.stores.ledger.base.Ledger`, are in
:mod:`mcp_server.stores.ledger` (``mcp_server.core.records.Ledger`` still answers, with a
``DeprecationWarning``).
"""

from __future__ import annotations

import hashlib
import json
import math
import operator
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from ..wire.jsonrpc import MAX_METHOD_LENGTH
from .moved import moved_names
from .states import State

__all__ = [
    "CLIENT_LENGTH",
    "KEY_LENGTH",
    "NAME_LENGTH",
    "OAUTH_CLIENT_LENGTH",
    "DuplicateRequest",
    "LedgerRecord",
    "id_of_key",
    "long_id_of",
    "make_storable",
    "request_key",
    "storable",
    "storable_json",
    "storable_outcome",
]

NAME_LENGTH = 300
"""What the ledger keeps of the tool, prompt or resource a request names (characters)."""
CLIENT_LENGTH = 200
"""Characters of ``"name version"`` the ledger keeps of a client."""
OAUTH_CLIENT_LENGTH = 255
"""Characters the ledger keeps of an OAuth client's id (a CIMD URL) and of its name."""


KEY_LENGTH = 200
"""Characters of the ledger's ``request_key`` column."""
_PREFIX = KEY_LENGTH - len("h:") - 64 - len(":")


def request_key(request_id: str | int) -> str:
    """The stored form of a JSON-RPC id: ``1`` and ``"1"`` stay distinct.

    A string id whose key would not fit :data:`KEY_LENGTH` (JSON-RPC lets an id be any string) is keyed
    ``h:<SHA-256 of its key>:<its first characters>``: distinct ids keep distinct keys (the uniqueness of a
    session's pending ids holds for them as for short ones), the prefix shows and searches in the admin, and
    the whole id is kept beside it (:attr:`LedgerRecord.long_id`). Short ids are not hashed.
    """
    key = f"i:{request_id}" if isinstance(request_id, int) else f"s:{request_id}"
    if len(key) <= KEY_LENGTH:
        return key
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
    return f"h:{digest}:{key[2 : 2 + _PREFIX]}"


def long_id_of(request_id: str | int, key: str) -> str:
    """The id a hashed ``key`` stands for (``""`` for a key that holds its id)."""
    return str(request_id) if key.startswith("h:") else ""


def storable(text: str, limit: int) -> str:
    """``text`` as every ledger backend can hold it: at most ``limit`` characters, each NUL character and
    lone UTF-16 surrogate replaced by U+FFFD (PostgreSQL's text columns refuse both, SQLite the latter).

    For what the client named (a tool, a prompt, a URI) and what an error said: the record shows it, the
    request is not refused for it.
    """
    text = text[:limit]
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def storable_json(value: Any) -> Any:
    """A decoded JSON ``value`` as every backend's JSON column can hold it: each text (keys too) through
    :func:`storable` (NUL and lone surrogates replaced, no length limit), each number past every float (an
    infinity, what ``1e400`` reads as) as its text; ``value`` itself when it holds none of those (``None``
    when nested too deep to walk). For what a client described itself with (``clientInfo``,
    ``capabilities``): stored to be shown, never refused."""
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
        text.encode()  # (a lone surrogate fails here)
        if "\\u0000" not in text:
            return value
    except RecursionError:  # nested past what any backend stores
        return None
    except (ValueError, TypeError, UnicodeEncodeError):
        pass
    try:
        return _storable_json(value)
    except RecursionError:
        return None


def _storable_text(text: str) -> str:
    """:func:`storable` with no length limit (a JSON value's texts are bounded by its size as a whole)."""
    return storable(text, len(text))


def _storable_json(value: Any) -> Any:
    if isinstance(value, str):
        return _storable_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {_storable_text(str(k)): _storable_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_storable_json(v) for v in value]
    return value


def storable_outcome(outcome: dict[str, Any] | None, limit: int = 500) -> dict[str, Any] | None:
    """An outcome (``{"result": true}`` or ``{"error": {"code", "message"}}``) every backend can hold."""
    if outcome is None or "error" not in outcome:
        return outcome
    error = outcome["error"] if isinstance(outcome["error"], dict) else {}
    code = error.get("code")
    return {
        "error": {
            "code": code if isinstance(code, int) and not isinstance(code, bool) else None,
            "message": storable(str(error.get("message", "")), limit),
        }
    }


class DuplicateRequest(Exception):
    """A request id already pending in the same session."""


@dataclass(slots=True)
class LedgerRecord:
    """One request as the ledger knows it (slotted: a record waits in the writer's queue for up to a flush
    interval, and each object the cyclic garbage collector tracks costs it time at every pass; an ``extra``
    left empty is not tracked)."""

    session_id: str | None
    request_key: str
    method: str
    name: str = ""
    user_id: int | None = None
    worker: str = ""
    channel: str = ""
    created: datetime | None = None
    deadline: datetime | None = None
    lease_expires: datetime | None = None
    state: str = State.PENDING
    settled_at: datetime | None = None
    outcome: dict[str, Any] | None = None
    round_of: str = ""
    """2026-07-28: the token of the ``input_required`` round this retry answers (its ``outcome["round"]``)."""
    pk: Any = None
    extra: dict[str, Any] = field(default_factory=dict)
    """Anything a ledger backend of the site's own keeps with the record (none of this project's reads it)."""
    protocol_version: str = ""
    """The MCP revision the request was served at (a 2026-07-28 request has no session)."""
    client: str = ""
    """``"name version"`` of the client that sent it (at 2026-07-28 from the request's own ``clientInfo``)."""
    long_id: str = ""
    """The whole id of a request keyed by its hash (see :func:`request_key`), else ``""``."""
    oauth_client_id: str = ""
    """The OAuth client whose access token authenticated the request (``""``: none), as the user is
    recorded: a plain value read off the authentication result the request already carries."""
    oauth_client_name: str = ""
    """That client's registered name."""
    trace_id: str = ""
    """The trace id of the request's server span (32 hex digits; ``""``: no span, telemetry off)."""
    span_id: str = ""
    """That span's own id (16 hex digits; ``""``: no span)."""

    @property
    def request_id(self) -> str | int:
        """The JSON-RPC id, with its original type."""
        return id_of_key(self.request_key, self.long_id)

    def snapshot(self) -> LedgerRecord:
        """A shallow copy, as ``dataclasses.replace(self)`` makes it but a quarter of its time: what a batch
        writes while the live record may change under it."""
        return LedgerRecord(*_FIELD_VALUES(self))  # (every field, in order: positional)


_FIELD_VALUES = operator.attrgetter(*(f.name for f in fields(LedgerRecord)))
"""A record's values of every field, in the order ``__init__`` takes them."""


def id_of_key(key: str, long_id: str = "") -> str | int:
    """The JSON-RPC id a stored ``key`` names (``long_id``: the whole id of a hashed key)."""
    kind, _, raw = key.partition(":")
    if kind == "h":
        return long_id or raw.partition(":")[2]
    return int(raw) if kind == "i" else raw


def make_storable(record: LedgerRecord) -> None:
    """Make every text field of ``record`` but its identity (session, request id) storable, in place."""
    record.method = storable(record.method, MAX_METHOD_LENGTH)
    record.name = storable(record.name, NAME_LENGTH)
    record.worker = storable(record.worker, 200)
    record.channel = storable(record.channel, 200)
    record.protocol_version = storable(record.protocol_version, 20)
    record.client = storable(record.client, CLIENT_LENGTH)
    record.oauth_client_id = storable(record.oauth_client_id, OAUTH_CLIENT_LENGTH)
    record.oauth_client_name = storable(record.oauth_client_name, OAUTH_CLIENT_LENGTH)
    record.trace_id = storable(record.trace_id, 32)
    record.span_id = storable(record.span_id, 16)
    record.outcome = storable_outcome(record.outcome)


__getattr__ = moved_names("mcp_server.core.records", {"Ledger": "mcp_server.stores.ledger.base"})
