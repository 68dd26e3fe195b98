"""Shapes that every revision's schema accepts exactly as they are, recognised without pydantic.

The request path validates what a client sends and shapes what a handler returns with the ``mcp-types``
models. For the commonest messages that work gives back what it was given: a request envelope of plain
JSON types, a tool result of text blocks. These tests recognise them in a few dictionary lookups, so that
the models run only for everything else (``tests/wire/test_shapes.py`` holds each fast answer to the
model's).
"""

from __future__ import annotations

import ast
from functools import lru_cache
from typing import Any

import orjson
from mcp_types.methods import serialize_server_result, validate_client_request
from pydantic import ValidationError

from .exact import exact_json
from .meta_key import schema_part
from .versions import is_sessionless_version

__all__ = [
    "is_plain_call_params",
    "is_plain_request",
    "is_plain_text_result",
    "keeps_structured_content",
    "shaped_result",
]

_TEXT_BLOCK_KEYS = frozenset({"type", "text"})
_RESULT_KEYS = frozenset({"content", "isError"})
_REQUEST_KEYS = frozenset({"jsonrpc", "id", "method", "params"})


def is_plain_text_result(
    result: dict[str, Any], extra_keys: frozenset[str] = frozenset(), *, structured: bool = False
) -> bool:
    """Whether ``result`` is a ``CallToolResult`` of text blocks only (``{"type": "text", "text": str}``)
    with at most ``isError`` (a bool) beside its ``content``, and the names in ``extra_keys``, which the
    caller vouches for: what ``serialize_server_result`` returns unchanged in every revision.

    ``structured``: a ``structuredContent`` object is allowed too. Only for a revision that has the field,
    and a result whose structured value is made of JSON types already (as ``Tool.call`` builds it: dumped
    in pydantic's JSON mode)."""
    for key in result:
        if key in _RESULT_KEYS or key in extra_keys:
            continue
        if key != "structuredContent" or not structured or type(result[key]) is not dict:
            return False
    content = result.get("content")
    if type(content) is not list:
        return False
    if "isError" in result and type(result["isError"]) is not bool:
        return False
    for block in content:
        if type(block) is not dict or block.keys() != _TEXT_BLOCK_KEYS:
            return False
        if block["type"] != "text" or type(block["text"]) is not str:
            return False
    return True


def is_plain_request(obj: dict[str, Any]) -> bool:
    """Whether ``obj`` is a JSON-RPC 2.0 request of the plainest shape (``jsonrpc``, an ``int`` or ``str``
    id, a ``str`` method, ``params`` an object or absent, nothing else) whose envelope the model would
    accept as it is. The id and method are still checked for what this server refuses (NUL, surrogates,
    range) by the caller."""
    if obj.get("jsonrpc") != "2.0" or "method" not in obj or "id" not in obj:
        return False
    for key in obj:
        if key not in _REQUEST_KEYS:
            return False
    if type(obj["method"]) is not str or type(obj["id"]) not in (int, str):
        return False
    params = obj.get("params", {})
    return type(params) is dict


_CALL_MODEL_KEYS = frozenset({"task", "inputResponses", "requestState"})
"""``tools/call`` params with a model of their own, left to the schema."""
_KEPT_META_CHARACTERS = 2048
"""A ``_meta`` whose text (:func:`_faithful_text`) is longer than this is validated every time, not
remembered."""


def is_plain_call_params(params: dict[str, Any], version: str) -> bool:
    """Whether ``tools/call`` ``params`` pass revision ``version``'s schema, told without running it for
    the usual shape: a ``str`` name, ``arguments`` an object or absent, none of the fields that have models
    of their own (``task``, ``inputResponses``, ``requestState``), and a ``_meta`` the schema accepted
    before (each distinct one is validated once, then remembered; the revision's other fields are
    independent of it and unknown keys are ignored: a ``_meta`` is remembered by the part the schema reads,
    :func:`~mcp_server.wire.meta_key.schema_part`). ``False`` leaves the request to the schema, which
    then accepts it or says why not."""
    if type(params.get("name")) is not str:
        return False
    arguments = params.get("arguments")
    if arguments is not None and type(arguments) is not dict:
        return False
    for key in _CALL_MODEL_KEYS:
        if key in params:
            return False
    if "_meta" not in params:
        return _meta_passes(version, None)
    meta = params["_meta"]
    if type(meta) is not dict:
        return False
    text = _faithful_text(schema_part(meta, version))  # what the schema reads of it: see wire.meta_key
    return text is not None and len(text) <= _KEPT_META_CHARACTERS and _meta_passes(version, text)


def _faithful_text(value: dict[str, Any]) -> bytes | str | None:
    """A text that reads back to ``value`` (decoded JSON) and to nothing else: ``"1"`` and ``1``, ``1.0``
    and ``1``, ``true`` and ``1`` differ. orjson's JSON (:func:`~mcp_server.wire.exact.exact_json`, a
    tenth of ``repr``'s cost) where it is exact, else the ``repr``: a ``null`` in it (NaN and the
    infinities write so too), or a value orjson refuses (an integer past 64 bits, a lone surrogate, a
    datetime, a dataclass, a subclass of a JSON type: the last three no JSON decoder makes). The ``repr``
    of an infinity (``1e400`` read) does not read back: :func:`_meta_passes` leaves such a text to the
    schema. ``None``: nested too deep to write."""
    data = exact_json(value)
    if data is not None:
        return data
    try:
        return repr(value)
    except RecursionError:
        return None


@lru_cache(maxsize=256)
def _meta_passes(version: str, text: bytes | str | None) -> bool:
    """Whether a ``tools/call`` with this ``_meta`` (``text``: its :func:`_faithful_text`, JSON as bytes or
    a ``repr``; ``None``: no ``_meta``) and nothing else but a name passes revision ``version``'s schema."""
    params: dict[str, Any] = {"name": "x"}
    if isinstance(text, bytes):
        params["_meta"] = orjson.loads(text)
    elif text is not None:
        try:
            params["_meta"] = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):  # no value reads back (inf, nan)
            return False  # left to the schema, which reads the value itself
    try:
        validate_client_request("tools/call", version, params)
    except (KeyError, ValueError, ValidationError):  # (ValidationError is a ValueError)
        return False
    return True


@lru_cache(maxsize=16)
def keeps_structured_content(version: str) -> bool:
    """Whether revision ``version``'s ``CallToolResult`` has ``structuredContent`` (asked of its schema once;
    older revisions drop the field)."""
    shaped: dict[str, Any] = {"content": [], "structuredContent": {"result": "x"}}
    if is_sessionless_version(version):
        shaped["resultType"] = "complete"
    try:
        return "structuredContent" in serialize_server_result("tools/call", version, shaped)
    except (KeyError, ValueError):
        return False


def shaped_result(
    method: str, version: str, result: dict[str, Any], vouched: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """``result`` as revision ``version``'s schema shapes it (``serialize_server_result``); a ``tools/call``
    result already in that shape (:func:`is_plain_text_result`, with the keys in ``vouched`` that the
    caller built itself) is returned as it is, and so is the result of a method the schema does not know."""
    if method == "tools/call" and is_plain_text_result(
        result, vouched, structured=keeps_structured_content(version)
    ):
        return result
    try:
        return serialize_server_result(method, version, result)
    except KeyError:  # a method the server registers itself
        return result
