"""``manage.py mcp_token``: create, list and revoke bearer tokens for MCP clients.

::

    manage.py mcp_token create alice --name "Claude desktop" --days 30 --scope "tool:books_*"
    manage.py mcp_token list [alice]          # id, prefix, user, name, status, expiry, last use, scopes
    manage.py mcp_token revoke mcp_AbCdEf      # a token's prefix (as listed), or its id
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from mcp_server.auth.models import AccessToken


class Command(BaseCommand):
    help = "Create, list and revoke MCP bearer tokens. The plain token is printed once, on creation."

    def add_arguments(self, parser: CommandParser) -> None:
        commands = parser.add_subparsers(dest="action", required=True)
        create = commands.add_parser("create", help="Create a token for a user and print it.")
        create.add_argument("username")
        create.add_argument("--name", default="", help="What the token is for.")
        create.add_argument(
            "--days", type=float, default=90.0, help="Days until it expires (0: never; default 90)."
        )
        create.add_argument(
            "--scope",
            action="append",
            default=[],
            help="Restrict the token, e.g. tool:search_books, tool:books_*, resource:library://*, prompt:*"
            " (repeatable; none: everything the user may use).",
        )
        listing = commands.add_parser("list", help="List tokens (of one user).")
        listing.add_argument("username", nargs="?")
        revoke = commands.add_parser("revoke", help="Revoke a token by its prefix or id.")
        revoke.add_argument("token")

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        if action == "create":
            self._create(options)
        elif action == "list":
            self._list(options.get("username"))
        else:
            self._revoke(options["token"])

    def _create(self, options: dict[str, Any]) -> None:
        User = get_user_model()
        try:
            user = User._default_manager.get_by_natural_key(options["username"])
        except User.DoesNotExist as exc:
            raise CommandError(
                f"No user {options['username']!r}: a token belongs to an existing user. Create the user "
                "first (manage.py createsuperuser for an administrator, or Users > Add in the admin), "
                "then run this again."
            ) from exc
        days = float(options["days"])
        if not math.isfinite(days) or days < 0:
            raise CommandError("--days must be 0 (never expires) or more")
        try:
            expires = timezone.now() + timedelta(days=days) if days > 0 else None
        except OverflowError:
            raise CommandError(f"--days {days:g} is too far in the future") from None
        token, plain = AccessToken.objects.create_token(
            user, options["name"], expires=expires, scopes=options["scope"]
        )
        self.stderr.write(f"Created token {token.pk} for {user}; it is shown only now:")
        self.stdout.write(plain)

    def _list(self, username: str | None) -> None:
        tokens = AccessToken.objects.select_related("user")
        if username:
            tokens = tokens.filter(user__username=username)
        for token in tokens:
            status = "revoked" if token.is_revoked else "expired" if token.is_expired() else "valid"
            expires = token.expires.isoformat() if token.expires else "never"
            scopes = " ".join(token.scopes) or "*"
            used = token.last_used.isoformat() if token.last_used else "never"
            columns = [token.pk, f"{token.prefix}…", token.user, token.name, status, f"expires {expires}"]
            columns += [f"last used {used}", scopes]
            self.stdout.write("\t".join(str(c) for c in columns))

    def _revoke(self, key: str) -> None:
        tokens = AccessToken.objects.filter(prefix=key.rstrip("…"))
        if key.isdigit():
            tokens = AccessToken.objects.filter(pk=int(key))
        matches = list(tokens)
        if len(matches) != 1:
            raise CommandError(f"{len(matches)} tokens match {key!r}; give exactly one (prefix or id)")
        matches[0].revoke()
        self.stdout.write(f"Revoked token {matches[0].pk} ({matches[0]})")
