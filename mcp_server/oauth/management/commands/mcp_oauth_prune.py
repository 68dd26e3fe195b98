"""``manage.py mcp_oauth_prune [--hours 24] [--dry-run]``: drop client registrations never used."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from ...prune import prune_unused_registrations


class Command(BaseCommand):
    help = (
        "Delete dynamically registered OAuth clients older than --hours that hold no grant and no token "
        "(clients such as Claude register anew on every connection)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--hours", type=float, default=24.0, help="Only registrations older than this.")
        parser.add_argument("--dry-run", action="store_true", help="Count them, delete nothing.")

    def handle(self, *args: Any, **options: Any) -> None:
        count = prune_unused_registrations(timedelta(hours=options["hours"]), dry_run=options["dry_run"])
        verb = "Would delete" if options["dry_run"] else "Deleted"
        self.stdout.write(f"{verb} {count} unused client registration(s).")
