"""Settings of the stdio tests: the test site plus ``tests.stdioapp`` (a noisy tool, a second server)."""

from __future__ import annotations

from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.stdioapp"]
