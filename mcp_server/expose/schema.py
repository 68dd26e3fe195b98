"""How an exposed tool is declared: a handler whose signature the registry reads its input and output
schemas from (``HandlerSignature``), as it does for a decorated function, and the default permission marker.

The model and form tools build their handlers at registration time, one keyword-only parameter per argument
(its annotation gives the argument's JSON Schema, its default makes it optional) and ``ctx`` last.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from ..core.context import Context

__all__ = ["DEFAULT_PERMISSION", "ctx_parameter", "keyword", "make_handler"]

DEFAULT_PERMISSION: Any = object()
"""Marker for ``permission=``: the default of the tool's kind (``expose_model``: the model's ``view``
permission; ``expose_form``: a ``ModelForm``'s ``add`` permission, none for a plain ``Form``)."""

_EMPTY: Any = inspect.Parameter.empty


def keyword(name: str, annotation: Any, default: Any = _EMPTY) -> inspect.Parameter:
    """A keyword-only argument of the tool: required unless it has a ``default``."""
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


def ctx_parameter() -> inspect.Parameter:
    """The ``ctx`` parameter every handler ends with: the registry fills it with the request's ``Context``."""
    return keyword("ctx", Context)


def make_handler(
    fn: Callable[..., Any], name: str, parameters: list[inspect.Parameter], returns: Any
) -> Callable[..., Any]:
    """``fn`` (which takes ``**arguments``) named ``name`` and given the signature ``parameters ->
    returns``, from which the registry makes the tool's schemas."""
    fn.__name__ = fn.__qualname__ = name
    fn.__signature__ = inspect.Signature(parameters, return_annotation=returns)  # type: ignore[attr-defined]
    fn.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": returns}
    return fn
