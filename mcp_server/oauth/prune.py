"""Dropping client registrations that never got anything (Claude registers a new client per connection)."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Exists, OuterRef
from django.utils import timezone

__all__ = ["prune_unused_registrations"]


def prune_unused_registrations(older_than: timedelta = timedelta(hours=24), *, dry_run: bool = False) -> int:
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
