"""JSON written by orjson where it says exactly what the standard library would (the request path writes
and keys JSON this way: replies, and the remembered ``_meta`` of a call)."""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["exact_json"]

_NOT_ITS_OWN_WAY = (
    orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS
)
"""What orjson must not encode its own way: datetimes, dataclasses and subclasses of the JSON types are
refused (the standard library refuses the first two, and encodes the last as their base type)."""


def exact_json(value: Any) -> bytes | None:
    """orjson's compact JSON of ``value`` when it says exactly what the standard library would, else
    ``None``: orjson refuses the value (a type it is not to write, an integer past 64 bits, a non-string
    key, a surrogate, nesting past 254) or its JSON holds ``null`` (orjson writes NaN and the infinities as
    ``null`` too)."""
    try:
        data = orjson.dumps(value, option=_NOT_ITS_OWN_WAY)
    except TypeError:  # orjson.JSONEncodeError
        return None
    # (bytes.find, not ``in``: on bytes, ``in`` first tries its operand as an integer, raising and
    # formatting a TypeError every time: ~2,000 instructions)
    return None if data.find(b"null") != -1 else data
