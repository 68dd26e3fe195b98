"""The rate limits of ``MCP_SERVER["RATE_LIMITS"]``: parsed once, matched against a request with no await.

A rule is a dict::

    {"per": "user", "target": "tool:search_*", "rate": "600/hour", "burst": 10, "name": "search"}

- ``per``: who is counted: ``"user"`` (an authenticated user), ``"token"`` (the access token, or the OAuth
  client of an OAuth token), ``"address"`` (an anonymous caller, by the client address the server sees).
- ``target``: what is counted: ``"tool:<glob>"``, ``"resource:<glob>"`` (the URI), ``"prompt:<glob>"``,
  ``"method:<glob>"`` (shell-style wildcards, :mod:`fnmatch`), ``"*"`` (every request), or ``"default"``
  (every request that no other rule with the same ``per`` matches). All a rule matches shares its count.
- ``rate``: ``"<count>/<period>"``, the period ``second``, ``minute``, ``hour`` or ``day`` (or ``s``, ``m``,
  ``h``, ``d``), optionally with a number of them (``"100/5m"``).
- ``burst`` (optional, below the count): at most that many calls in the time the rate takes to earn them
  (``10`` with ``600/hour``: 10 a minute): a token bucket's capacity, counted as a second window.

:func:`parse_rules` raises :class:`ValueError` naming what is wrong (the system checks report it).
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

__all__ = [
    "PER",
    "Rule",
    "Window",
    "compiled_rules",
    "matching_rules",
    "parse_rule",
    "parse_rules",
]

PER = ("user", "token", "address")
"""Who a rule counts."""

KINDS = ("tool", "resource", "prompt", "method")
"""What a rule's ``target`` may name before its ``:``."""

_PERIODS = {"s": 1, "second": 1, "m": 60, "minute": 60, "h": 3600, "hour": 3600, "d": 86400, "day": 86400}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*([a-z]+)\s*$")
_MAX_SECONDS = 31 * 86400
_MAX_COUNT = 10**9
_KEYS = {"per", "target", "rate", "burst", "name"}


@dataclass(frozen=True)
class Window:
    """One counter of a rule: at most ``count`` calls in ``seconds`` (a window opened by its first call)."""

    count: int
    seconds: int
    kind: str
    """``"rate"`` (the sustained rate) or ``"burst"``."""


@dataclass(frozen=True)
class Rule:
    """One parsed rate limit."""

    per: str
    target: str
    rate: str
    burst: int | None
    name: str
    windows: tuple[Window, ...]
    key: str
    """A short digest of the rule's text: its counters' cache keys (a changed rule starts afresh)."""

    def describe(self) -> dict[str, Any]:
        """The rule as a refusal's ``data.limit`` names it."""
        out: dict[str, Any] = {"name": self.name, "per": self.per, "target": self.target, "rate": self.rate}
        if self.burst is not None:
            out["burst"] = self.burst
        return out


def _rate(text: Any) -> tuple[int, int]:
    match = _RATE.match(text) if isinstance(text, str) else None
    if match is None or match.group(3) not in _PERIODS:
        raise ValueError(f"rate {text!r} is not '<count>/<period>' (period second, minute, hour or day)")
    count, times = int(match.group(1)), int(match.group(2) or 1)
    seconds = times * _PERIODS[match.group(3)]
    if not 0 < count <= _MAX_COUNT:
        raise ValueError(f"rate {text!r}: the count must be between 1 and {_MAX_COUNT}")
    if not 0 < seconds <= _MAX_SECONDS:
        raise ValueError(f"rate {text!r}: the period must be between 1 second and 31 days")
    return count, seconds


def _target(text: Any) -> str:
    if not isinstance(text, str) or not text:
        raise ValueError(f"target {text!r} is not a string")
    if text in ("*", "default"):
        return text
    kind, sep, pattern = text.partition(":")
    if not sep or kind not in KINDS or not pattern:
        raise ValueError(f"target {text!r} is not '*', 'default' or '<tool|resource|prompt|method>:<glob>'")
    return text


def parse_rule(raw: Any, index: int = 0) -> Rule:
    """One rule from its dict; raises ``ValueError`` when it is not a valid rule."""
    if not isinstance(raw, dict):
        raise ValueError("a rule must be a dict")
    unknown = set(raw) - _KEYS
    if unknown:
        raise ValueError(f"unknown keys {sorted(unknown)}")
    per = raw.get("per")
    if per not in PER:
        raise ValueError(f"per {per!r} is not one of {', '.join(PER)}")
    target = _target(raw.get("target", "*"))
    count, seconds = _rate(raw.get("rate"))
    burst = raw.get("burst")
    windows = [Window(count, seconds, "rate")]
    if burst is not None:
        if not isinstance(burst, int) or isinstance(burst, bool) or not 0 < burst <= count:
            raise ValueError(f"burst {burst!r} must be a whole number from 1 to the rate's count ({count})")
        if burst < count:
            windows.insert(0, Window(burst, max(1, math.ceil(burst * seconds / count)), "burst"))
    name = raw.get("name", f"{per} {target}")
    if not isinstance(name, str) or not name or len(name) > 100:
        raise ValueError(f"name {name!r} must be a string of 1 to 100 characters")
    text = f"{per}|{target}|{count}/{seconds}|{burst}"
    key = hashlib.blake2s(text.encode(), digest_size=6).hexdigest()
    return Rule(per, target, str(raw["rate"]), burst, name, tuple(windows), key)


def parse_rules(raw: Any) -> tuple[Rule, ...]:
    """Every rule of ``RATE_LIMITS`` (``None``: none); raises ``ValueError`` naming the first bad one."""
    if raw is None:
        return ()
    if not isinstance(raw, list | tuple):
        raise ValueError("RATE_LIMITS must be a list of rules (dicts) or None")
    rules = []
    for index, item in enumerate(raw):
        try:
            rules.append(parse_rule(item, index))
        except ValueError as exc:
            raise ValueError(f"rule {index}: {exc}") from None
    return tuple(rules)


_compiled: tuple[Any, tuple[Rule, ...]] = (None, ())


def compiled_rules(raw: Any) -> tuple[Rule, ...]:
    """:func:`parse_rules` of ``raw``, parsed once per settings object (an invalid list: no rules, the
    checks report it)."""
    global _compiled
    if _compiled[0] is not raw:
        try:
            rules = parse_rules(raw)
        except ValueError:
            rules = ()
        _compiled = (raw, rules)
    return _compiled[1]


def _subjects(method: str, params: dict[str, Any]) -> list[str]:
    """What a request is, in a target's terms: ``method:<m>`` and the tool, prompt or resource it names."""
    subjects = [f"method:{method}"]
    name = params.get("name")
    if method == "tools/call" and isinstance(name, str):
        subjects.append(f"tool:{name}")
    elif method == "prompts/get" and isinstance(name, str):
        subjects.append(f"prompt:{name}")
    elif method.startswith("resources/") and isinstance(params.get("uri"), str):
        subjects.append(f"resource:{params['uri']}")
    return subjects


def _matches(target: str, subjects: list[str]) -> bool:
    if target == "*":
        return True
    kind, _, pattern = target.partition(":")
    prefix = f"{kind}:"
    return any(s.startswith(prefix) and fnmatchcase(s[len(prefix) :], pattern) for s in subjects)


def matching_rules(
    rules: tuple[Rule, ...], method: str, params: dict[str, Any], pers: frozenset[str]
) -> list[Rule]:
    """The rules that count this request, for the ``pers`` that apply to its caller."""
    if not rules:
        return []
    subjects = _subjects(method, params)
    found = [r for r in rules if r.per in pers and r.target != "default" and _matches(r.target, subjects)]
    covered = {r.per for r in found}
    found += [r for r in rules if r.target == "default" and r.per in pers and r.per not in covered]
    return found
