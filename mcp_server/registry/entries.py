"""What every registered handler shares: its name, metadata, permission and signature."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.models import AnonymousUser

from .signature import HandlerSignature, call_handler

__all__ = ["Permission", "RegisteredHandler", "allowed"]

Permission = str | Callable[[Any], bool] | None
"""A Django permission string (``"app.codename"``) or a callable taking the user."""


def allowed(permission: Permission, user: Any) -> bool:
    """Whether ``user`` may use a handler guarded by ``permission``."""
    if permission is None:
        return True
    user = user if user is not None else AnonymousUser()
    if callable(permission):
        return bool(permission(user))
    return bool(user.has_perm(permission))


@dataclass
class RegisteredHandler:
    """Base of tools, resources and prompts."""

    name: str
    fn: Callable[..., Any]
    title: str | None = None
    description: str | None = None
    permission: Permission = None
    meta: dict[str, Any] | None = None
    icons: list[dict[str, Any]] | None = None
    signature: HandlerSignature = field(init=False)

    def __post_init__(self) -> None:
        self.signature = HandlerSignature(
            self.fn,
            model_name=f"{self.name.replace('/', '_')}_arguments",
            free_arguments=self.takes_free_arguments(),
        )
        if self.description is None and self.fn.__doc__:
            self.description = " ".join(self.fn.__doc__.strip().split("\n\n")[0].split())

    def run(self, kwargs: dict[str, Any]) -> Awaitable[Any]:
        """The handler called with ``kwargs`` (bound by its signature): an async handler's coroutine as it
        is (its kind was read at registration), a sync one run by :func:`call_handler` in a worker thread."""
        fn, signature = self.fn, self.signature
        if fn is signature.fn and signature.is_async:
            awaitable: Awaitable[Any] = fn(**kwargs)
            return awaitable
        return call_handler(fn, **kwargs)

    def takes_free_arguments(self) -> bool:
        """Whether the handler may take ``**kwargs`` (see ``HandlerSignature``); tools with an explicit
        ``input_schema`` may."""
        return False

    def base_definition(self) -> dict[str, Any]:
        """``name``, ``title``, ``description``, ``icons``, ``_meta`` where set."""
        out: dict[str, Any] = {"name": self.name}
        if self.title:
            out["title"] = self.title
        if self.description:
            out["description"] = self.description
        if self.icons:
            out["icons"] = self.icons
        if self.meta:
            out["_meta"] = self.meta
        return out
