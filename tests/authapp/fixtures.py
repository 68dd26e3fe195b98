"""Users, tokens and sessions for the authentication tests, made in a live server's database.

Run with the server's environment: by ``tests.support.auth.make_fixtures`` (in the server's ``manage.py
shell``), or ``python -m tests.authapp.fixtures``; prints JSON.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any


def make() -> dict[str, Any]:
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
    from django.contrib.auth.models import Permission
    from django.contrib.sessions.backends.db import SessionStore
    from django.utils import timezone

    from mcp_server.auth.models import AccessToken

    User = get_user_model()
    out: dict[str, Any] = {"tokens": {}, "cookies": {}}

    def user(name: str, *perms: str, **fields: Any) -> Any:
        obj, _created = User.objects.get_or_create(username=name, defaults=fields)
        obj.set_password("pw-" + name)
        obj.save()
        for perm in perms:
            app_label, codename = perm.split(".")
            obj.user_permissions.add(
                Permission.objects.get(content_type__app_label=app_label, codename=codename)
            )
        return obj

    alice = user("alice")
    bob = user("bob", "catalogue.add_loan", "catalogue.view_book", "catalogue.view_loan")
    sam = user("sam", is_staff=True)
    dave = user("dave")
    carol = user(
        "carol", "catalogue.view_book", "catalogue.add_book", "catalogue.change_book", "catalogue.add_author"
    )
    dora = user("dora", "catalogue.delete_loan")
    gone = user("gone", is_active=False)
    day = timedelta(days=1)
    for key, owner, kwargs in [
        ("alice", alice, {"expires": timezone.now() + day}),
        ("bob", bob, {"expires": timezone.now() + day}),
        ("bob2", bob, {}),
        ("bob_whoami_only", bob, {"scopes": ["tool:whoami"]}),
        ("bob_books", bob, {"scopes": ["tool:books_*"]}),
        ("bob_expired", bob, {"expires": timezone.now() - timedelta(seconds=1)}),
        ("bob_to_revoke", bob, {}),
        ("gone", gone, {}),
        ("carol", carol, {}),
        ("dora", dora, {}),
        ("dave", dave, {}),
        ("sam", sam, {}),
        ("carol_reads", carol, {"scopes": ["tool:shelf_list", "tool:shelf_get"]}),
        ("carol_drf_reads", carol, {"scopes": ["tool:drf_books_list", "tool:drf_books_retrieve"]}),
    ]:
        token, plain = AccessToken.objects.create_token(owner, key, **kwargs)
        out["tokens"][key] = plain
        out.setdefault("ids", {})[key] = token.pk
    for owner in (sam, bob):
        session = SessionStore()
        session[SESSION_KEY] = str(owner.pk)
        session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
        session[HASH_SESSION_KEY] = owner.get_session_auth_hash()
        session.create()
        out["cookies"][owner.username] = session.session_key
    return out


if __name__ == "__main__":
    import django

    django.setup()
    print(json.dumps(make()))
