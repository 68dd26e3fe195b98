"""Dropping client registrations that never got anything (Claude registers a new client per connection).

``manage.py mcp_oauth_prune`` does it on demand; every worker's upkeep calls :func:`upkeep_prune` (added to
the upkeep hooks by the app config), which prunes at most once per :data:`PRUNE_EVERY` across the site.
"""

from __future__ import annotations

from datetime import timedelta

from django.core.cache import cache
from django.db.models import Exists, OuterRef
from django.utils import timezone

__all__ = ["PRUNE_AFTER", "PRUNE_EVERY", "prune_unused_registrations", "upkeep_prune"]

PRUNE_AFTER = timedelta(hours=24)
"""A registration unused for this long is pruned by the upkeep (``mcp_oauth_prune --hours`` chooses)."""

PRUNE_EVERY = 600
"""Seconds between two prunings by the upkeep, whichever worker does it (a key in the default cache)."""

PRUNE_KEY = "mcp-oauth-prune"


def prune_unused_registrations(older_than: timedelta = PRUNE_AFTER, *, dry_run: bool = False) -> int:
    """Delete the dynamically registered clients older than ``older_than`` that hold no grant, no access
    token (their registration token aside) and no refresh token; returns how many (would) go."""
    from oauth2_provider.models import (
        get_access_token_model,
        get_application_model,
        get_grant_model,
        get_refresh_token_model,
    )
    from oauth2_provider.settings import oauth2_settings

    application = get_application_model()
    tokens = (
        get_access_token_model()
        .objects.filter(application=OuterRef("pk"))
        .exclude(scope=oauth2_settings.DCR_REGISTRATION_SCOPE)
    )
    unused = (
        application.objects.filter(
            registration_source=application.RegistrationSource.DCR, created__lt=timezone.now() - older_than
        )
        .exclude(Exists(tokens))
        .exclude(Exists(get_refresh_token_model().objects.filter(application=OuterRef("pk"))))
        .exclude(Exists(get_grant_model().objects.filter(application=OuterRef("pk"))))
    )
    count = int(unused.count())
    if not dry_run and count:
        application.objects.filter(pk__in=list(unused.values_list("pk", flat=True))).delete()
    return count


def upkeep_prune() -> dict[str, int]:
    """The upkeep hook: prune the registrations unused for :data:`PRUNE_AFTER`, unless a worker did it less
    than :data:`PRUNE_EVERY` seconds ago."""
    if not cache.add(PRUNE_KEY, 1, PRUNE_EVERY):
        return {}
    return {"registrations_pruned": prune_unused_registrations()}
