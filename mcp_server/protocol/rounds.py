"""The signed ``requestState`` of input rounds (2026-07-28), and the ``input_required`` result.

A state carries the answers of every round so far (the client resends only the latest round's), bound to the
request it was issued for: the method, the tool or prompt name or the resource URI, a digest of the
arguments, the caller and the server. It is signed with Django's signing (``SECRET_KEY``), salted, and
expires after ``REQUEST_STATE_MAX_AGE`` seconds. A state that was altered, has expired, or was issued for
another request is refused with -32602; nothing of the handler runs.
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Any

from django.core import signing

from ..conf import mcp_settings
from ..core.context import Context
from ..core.rounds import INPUT_METHODS, InputRequired, InputRounds, round_token
from ..wire.errors import INVALID_PARAMS, JSONRPCError

__all__ = ["input_required_result", "open_rounds", "previous_round", "sign_state"]

SALT = "mcp_server.rounds.request_state"
STATE_VERSION = 1


def _target(ctx: Context) -> str:
    key = "uri" if ctx.method == "resources/read" else "name"
    return str(ctx.params.get(key, ""))


def _binding(ctx: Context) -> dict[str, Any]:
    """What a state is valid for: this method on this target with these arguments, by this caller."""
    arguments = ctx.params.get("arguments")
    encoded = json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str).encode()
    user = getattr(ctx.user, "pk", None)
    return {
        "m": ctx.method,
        "t": _target(ctx),
        "a": hashlib.sha256(encoded).hexdigest()[:32],
        "u": None if user is None else str(user),
        "s": ctx.server.key,
    }


def sign_state(ctx: Context, answers: dict[str, Any]) -> str:
    """A ``requestState`` carrying ``answers`` for ``ctx``'s request."""
    payload = {"v": STATE_VERSION, "b": _binding(ctx), "answers": answers}
    return signing.dumps(payload, salt=SALT, compress=True)


def _refuse(reason: str) -> JSONRPCError:
    return JSONRPCError(
        INVALID_PARAMS, f"Invalid or expired requestState: {reason}", {"reason": "invalid_request_state"}
    )


def _read_state(ctx: Context, state: object) -> dict[str, Any]:
    """The answers a verified ``requestState`` carries; -32602 for one that is not valid for ``ctx``."""
    if not isinstance(state, str):
        raise _refuse("not a string")
    try:
        payload = signing.loads(
            state, salt=SALT, max_age=timedelta(seconds=mcp_settings.REQUEST_STATE_MAX_AGE)
        )
    except signing.SignatureExpired:
        raise _refuse("it has expired") from None
    except signing.BadSignature:
        raise _refuse("its signature does not match (altered, or not issued by this server)") from None
    if not isinstance(payload, dict) or payload.get("v") != STATE_VERSION:
        raise _refuse("unknown format")
    if payload.get("b") != _binding(ctx):
        raise _refuse("it was issued for another request (method, target, arguments or caller)")
    answers = payload.get("answers")
    return answers if isinstance(answers, dict) else {}


def _responses(ctx: Context) -> dict[str, Any]:
    if "inputResponses" not in ctx.params:
        return {}
    responses = ctx.params["inputResponses"]
    if not isinstance(responses, dict):
        raise JSONRPCError(INVALID_PARAMS, "Invalid params: inputResponses must be an object")
    return responses


def open_rounds(ctx: Context) -> InputRounds | None:
    """The input rounds of a 2026-07-28 ``tools/call``, ``prompts/get`` or ``resources/read`` (``None`` for
    any other request): its ``inputResponses`` and the answers of its verified ``requestState``."""
    if not ctx.sessionless or ctx.method not in INPUT_METHODS:
        return None
    responses = _responses(ctx)
    carried = _read_state(ctx, ctx.params["requestState"]) if "requestState" in ctx.params else {}
    return InputRounds(ctx.session.client_capabilities, responses, carried)


def previous_round(ctx: Context) -> str:
    """The ledger link of a retry: the token of the round its valid ``requestState`` answers, else ``""``."""
    if not ctx.sessionless or ctx.method not in INPUT_METHODS or "requestState" not in ctx.params:
        return ""
    try:
        _read_state(ctx, ctx.params["requestState"])
    except JSONRPCError:
        return ""  # refused when the request runs
    return round_token(ctx.params["requestState"]) or ""


def input_required_result(ctx: Context, signal: InputRequired) -> dict[str, Any]:
    """The ``input_required`` result for the asks ``signal`` carries, with a fresh signed state."""
    answers = ctx.rounds.answers_so_far() if ctx.rounds is not None else {}
    return {
        "resultType": "input_required",
        "inputRequests": {key: request.to_wire() for key, request in signal.requests.items()},
        "requestState": sign_state(ctx, answers),
    }
