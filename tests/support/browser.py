"""Debian's Chromium, as the browser tests drive it through Playwright (no browser download)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["CHROMIUM", "CHROMIUM_ARGS"]

CHROMIUM = Path("/usr/bin/chromium")


CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
