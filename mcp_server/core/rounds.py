"""Input rounds: what ``ctx.elicit``, ``ctx.sample`` and ``ctx.list_roots`` become at 2026-07-28.

The 2026-07-28 revision has no server-to-client requests. A ``tools/call``, ``prompts/get`` or
``resources/read`` that needs the client's input answers ``{"resultType": "input_required", "inputRequests":
{...}, "requestState": "..."}`` and the client retries the same request with ``inputResponses`` (multi
round-trip requests, MRTR). The handler runs again from the start on each retry: every ask either finds its
answer (in this retry's ``inputResponses``, or among the answers of earlier rounds carried in the signed
``requestState``) or stops the handler with :class:`InputRequired`, which the reply guarantee turns into the
``input_required`` result. Each ask has a key: the caller's, or one derived from the order of the asks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from mcp_types import _v2026_07_28 as v2026
from pydantic import BaseModel, ValidationError

from ..wire.errors import INVALID_PARAMS, JSONRPCError
from ..wire.jsonrpc import lone_surrogate_at

__all__ = [
    "INPUT_METHODS",
    "MISSING_CAPABILITY",
    "InputRequest",
    "InputRequired",
    "InputRounds",
    "readable_answer",
    "round_token",
]

INPUT_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})
"""The only methods that may answer ``input_required``."""

MISSING_CAPABILITY = -32021
"""2026-07-28: the request needs a client capability its ``_meta`` did not declare."""

_RESULTS: dict[str, type[BaseModel]] = {
    "elicitation/create": v2026.ElicitResult,
    "sampling/createMessage": v2026.CreateMessageResult,
    "roots/list": v2026.ListRootsResult,
}
_KEY_PREFIX = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}


def round_token(request_state: object) -> str | None:
    """What links a retry to the round it answers, in the ledger: a digest of the ``requestState``."""
    if not isinstance(request_state, str):
        return None
    return hashlib.sha256(request_state.encode()).hexdigest()[:32]


_Answer = TypeVar("_Answer")


@dataclass(frozen=True)
class InputRequest:
    """One question for the client: ``elicitation/create``, ``sampling/createMessage`` or ``roots/list``."""

    method: str
    params: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def elicitation(cls, message: str, requested_schema: dict[str, Any]) -> InputRequest:
        """A form elicitation (the answer is ``{"action": ..., "content": ...}``)."""
        return cls(
            "elicitation/create", {"mode": "form", "message": message, "requestedSchema": requested_schema}
        )

    @classmethod
    def sampling(
        cls,
        messages: list[dict[str, Any]] | str,
        *,
        max_tokens: int = 1000,
        system_prompt: str | None = None,
        **extra: Any,
    ) -> InputRequest:
        """A completion by the client's model (the answer is a ``CreateMessageResult``)."""
        if isinstance(messages, str):
            messages = [{"role": "user", "content": {"type": "text", "text": messages}}]
        params: dict[str, Any] = {"messages": messages, "maxTokens": max_tokens, **extra}
        if system_prompt is not None:
            params["systemPrompt"] = system_prompt
        return cls("sampling/createMessage", params)

    @classmethod
    def roots(cls) -> InputRequest:
        """The client's roots (the answer is ``{"roots": [...]}``)."""
        return cls("roots/list", {})

    @property
    def capability(self) -> str:
        """The top-level client capability this request needs."""
        return _KEY_PREFIX[self.method]

    def missing_capability(self, capabilities: Mapping[str, Any]) -> dict[str, Any] | None:
        """The ``requiredCapabilities`` when ``capabilities`` cannot serve this request, else ``None``."""
        declared = capabilities.get(self.capability)
        if self.method == "elicitation/create":
            mode = "url" if self.params.get("mode") == "url" else "form"
            modes = declared if isinstance(declared, dict) else None
            if modes is None or not (mode in modes or (mode == "form" and "url" not in modes)):
                return {"elicitation": {mode: {}}}
            return None
        if not isinstance(declared, dict):
            return {self.capability: {}}
        if self.method == "sampling/createMessage" and self.params.get("tools") and "tools" not in declared:
            return {"sampling": {"tools": {}}}
        return None

    def to_wire(self) -> dict[str, Any]:
        """The request as an ``inputRequests`` value."""
        return {"method": self.method, "params": self.params}

    def check_answer(self, key: str, answer: object) -> dict[str, Any]:
        """``answer`` when it is a valid result for this request; -32602 otherwise."""
        try:
            if not isinstance(answer, dict):
                raise TypeError(f"an object, not {type(answer).__name__}")
            _RESULTS[self.method].model_validate(answer)
        except (TypeError, ValidationError) as exc:
            detail = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else f"expected {exc}"
            raise JSONRPCError(
                INVALID_PARAMS, f"inputResponses[{key!r}] is not a valid {self.method} result: {detail}"
            ) from None
        return readable_answer(self.method, f"inputResponses[{key!r}]", answer)


def readable_answer(method: str, label: str, answer: _Answer) -> _Answer:
    """``answer`` (the client's result of ``method``) unless a string in it holds a lone UTF-16 surrogate:
    -32602, as for a tool's arguments. What the user typed into a form is text the handler stores."""
    where = lone_surrogate_at(answer)
    if where is None:
        return answer
    path = ".".join(str(part) for part in where) or "the result"
    raise JSONRPCError(
        INVALID_PARAMS,
        f"{label} is not a valid {method} result: {path}: a string holds a lone UTF-16 surrogate",
    )


class InputRequired(BaseException):
    """Raised by an ask whose answer the request does not carry: the request answers ``input_required``.

    A ``BaseException``, so that a handler's ``except Exception`` (and a tool's error result) does not swallow
    it; the reply guarantee catches it.
    """

    def __init__(self, requests: dict[str, InputRequest]) -> None:
        super().__init__(f"input required: {', '.join(requests)}")
        self.requests = requests


class InputRounds:
    """The answers one 2026-07-28 request carries, and the asks its handler made so far."""

    def __init__(
        self,
        capabilities: Mapping[str, Any],
        responses: Mapping[str, Any] | None = None,
        carried: Mapping[str, Any] | None = None,
    ) -> None:
        self.capabilities = capabilities
        self.responses = dict(responses or {})
        """This retry's ``inputResponses`` (answers to the latest round, or sent without a state)."""
        self.carried = dict(carried or {})
        """Answers of earlier rounds, from the verified ``requestState``."""
        self.used: dict[str, Any] = {}
        """Answers this run consumed."""
        self._asked: set[str] = set()
        self._count = 0

    def next_key(self, request: InputRequest) -> str:
        """The key of the next ask: its kind and its position among the asks (``elicitation-1``, ...)."""
        self._count += 1
        return f"{_KEY_PREFIX[request.method]}-{self._count}"

    def answers_so_far(self) -> dict[str, Any]:
        """Every answer the next ``requestState`` must carry."""
        return {**self.carried, **self.used}

    def take(self, requests: Mapping[str, InputRequest]) -> dict[str, dict[str, Any]]:
        """The answers to ``requests`` (all asked in one round); raises :class:`InputRequired` for those not
        answered yet, -32021 when the client did not declare what one needs, -32602 for a malformed answer."""
        self._check_capabilities(requests)
        answers: dict[str, dict[str, Any]] = {}
        missing: dict[str, InputRequest] = {}
        for key, request in requests.items():
            if key in self._asked:
                raise ValueError(f"input key {key!r} was already asked in this request")
            self._asked.add(key)
            source = self.responses if key in self.responses else self.carried
            if key in source:
                answers[key] = request.check_answer(key, source[key])
            else:
                missing[key] = request
        self.used.update(answers)
        if missing:
            raise InputRequired(missing)
        return answers

    def _check_capabilities(self, requests: Mapping[str, InputRequest]) -> None:
        required: dict[str, Any] = {}
        for request in requests.values():
            for name, value in (request.missing_capability(self.capabilities) or {}).items():
                required.setdefault(name, {}).update(value)
        if required:
            names = ", ".join(sorted(required))
            raise JSONRPCError(
                MISSING_CAPABILITY,
                f"Missing required client capability: {names} (not declared in this request's _meta)",
                {"requiredCapabilities": required},
            )
