"""A new session's row, stored by the prepared ``INSERT``, is the row Django's own ``create()`` stores, with
the same signals and errors. Run on PostgreSQL too."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db import IntegrityError
from django.db.models.signals import post_save, pre_save
from django.utils import timezone

from mcp_server.models import Session
from mcp_server.session_rows import insert_session
from mcp_server.sessions import acreate_session
from tests.support.rerun import not_in_rerun, rerun_on_postgresql

pytestmark = pytest.mark.django_db(transaction=True)

PARAMS = {
    "protocolVersion": "2025-11-25",
    "clientInfo": {"name": "é client \u2028", "version": "1.0", "extra": {"nested": [1, None, "x"]}},
    "capabilities": {"roots": {"listChanged": True}, "elicitation": {}},
}


def stored(session_id: str) -> dict[str, Any]:
    """Every column of the row, by attribute name."""
    return dict(Session.objects.filter(pk=session_id).values().get())


def test_the_row_is_the_one_djangos_create_stores(django_user_model: Any) -> None:
    user = django_user_model.objects.create_user("ana")
    session = async_to_sync(acreate_session)(
        server="default", protocol_version="2025-11-25", params=PARAMS, user=user, client_address="10.0.0.7"
    )
    mine = stored(session.id)
    twin = Session.objects.create(**{**mine, "id": "twin", "created": None})  # (auto_now_add sets it)
    theirs = stored(twin.pk)
    assert {**mine, "id": "twin"} == {**theirs, "created": mine["created"]}
    assert mine["client_info"] == PARAMS["clientInfo"]
    assert mine["client_capabilities"] == PARAMS["capabilities"]
    assert mine["user_id"] == user.pk
    assert mine["subscriptions"] == []
    assert mine["ended_at"] is None
    assert mine["client_address"] == "10.0.0.7"
    fresh = Session.objects.get(pk=session.id)
    assert (
        abs(fresh.created - session.created).total_seconds() < 1e-3
    )  # set by the insert, kept on the object
    assert not session._state.adding


def test_pre_and_post_save_are_sent_as_for_a_create() -> None:
    seen: list[tuple[str, Any]] = []

    def before(sender: Any, instance: Session, **kwargs: Any) -> None:
        seen.append(("pre", kwargs["raw"]))

    def after(sender: Any, instance: Session, created: bool, **kwargs: Any) -> None:
        seen.append(("post", created))
        assert Session.objects.filter(pk=instance.pk).exists()  # the row is there when it is sent

    pre_save.connect(before, sender=Session)
    post_save.connect(after, sender=Session)
    try:
        async_to_sync(acreate_session)(server="default", protocol_version="2025-11-25", params=PARAMS)
    finally:
        pre_save.disconnect(before, sender=Session)
        post_save.disconnect(after, sender=Session)
    assert seen == [("pre", False), ("post", True)]


def test_a_duplicate_id_is_djangos_integrity_error() -> None:
    insert_session(Session(id="same", protocol_version="2025-11-25", last_seen=timezone.now()))
    with pytest.raises(IntegrityError):
        insert_session(Session(id="same", protocol_version="2025-11-25", last_seen=timezone.now()))


@not_in_rerun
def test_the_same_on_postgresql() -> None:
    rerun_on_postgresql(__file__)
