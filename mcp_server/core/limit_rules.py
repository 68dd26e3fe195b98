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

A quota (``MCP_SERVER["QUOTAS"]``) is a dict too::

    {"per": "user", "target": "tool:*", "quota": 1000, "period": "day", "name": "daily calls"}

- ``per`` and ``target`` as above (a ``default`` quota: every request no other quota of its ``per`` matches);
- ``quota``: at most that many calls in each calendar ``period``, ``"day"`` or ``"month"`` (UTC): the count
  starts afresh at midnight, or on the first of the month.

:func:`parse_quotas` raises :class:`ValueError` likewise. A rate rule and a quota never share a count.
"""

from __future__ import annotations

import calendar
import contextlib
import hashlib
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from typing import Any

__all__ = [
    "PER",
    "QUOTA_PERIODS",
    "Rule",
    "Window",
    "calendar_period",
    "compiled_rules",
    "matching_rules",
    "parse_quota",
    "parse_quotas",
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
_QUOTA_KEYS = {"per", "target", "quota", "period", "name"}

QUOTA_PERIODS = ("day", "month")
"""The calendar periods of a quota (UTC)."""


@dataclass(frozen=True)
class Window:
    """One counter of a rule: at most ``count`` calls in ``seconds`` (a window opened by its first call)."""

    count: int
    seconds: int
    kind: str
    """``"rate"`` (the sustained rate), ``"burst"``, or a quota's calendar period (``"day"``,
    ``"month"``: then ``seconds`` is the longest such period; the window is the calendar's, see
    :func:`calendar_period`)."""


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
    period: str | None = None
    """A quota's calendar period (``"day"`` or ``"month"``); ``None`` for a rate rule."""

    def describe(self) -> dict[str, Any]:
        """The rule as a refusal's ``data.limit`` names it."""
        out: dict[str, Any] = {"name": self.name, "per": self.per, "target": self.target}
        if self.period is not None:
            out.update(quota=self.windows[0].count, period=self.period)
            return out
        out["rate"] = self.rate
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


def _who_and_what(raw: Any, keys: set[str]) -> tuple[str, str]:
    if not isinstance(raw, dict):
        raise ValueError("a rule must be a dict")
    unknown = set(raw) - keys
    if unknown:
        raise ValueError(f"unknown keys {sorted(unknown)}")
    per = raw.get("per")
    if per not in PER:
        raise ValueError(f"per {per!r} is not one of {', '.join(PER)}")
    return per, _target(raw.get("target", "*"))


def _name(raw: dict[str, Any], default: str) -> str:
    name = raw.get("name", default)
    if not isinstance(name, str) or not name or len(name) > 100:
        raise ValueError(f"name {name!r} must be a string of 1 to 100 characters")
    return name


def parse_rule(raw: Any, index: int = 0) -> Rule:
    """One rule from its dict; raises ``ValueError`` when it is not a valid rule."""
    per, target = _who_and_what(raw, _KEYS)
    count, seconds = _rate(raw.get("rate"))
    burst = raw.get("burst")
    windows = [Window(count, seconds, "rate")]
    if burst is not None:
        if not isinstance(burst, int) or isinstance(burst, bool) or not 0 < burst <= count:
            raise ValueError(f"burst {burst!r} must be a whole number from 1 to the rate's count ({count})")
        if burst < count:
            windows.insert(0, Window(burst, max(1, math.ceil(burst * seconds / count)), "burst"))
    name = _name(raw, f"{per} {target}")
    text = f"{per}|{target}|{count}/{seconds}|{burst}"
    key = hashlib.blake2s(text.encode(), digest_size=6).hexdigest()
    return Rule(per, target, str(raw["rate"]), burst, name, tuple(windows), key)


def parse_quota(raw: Any) -> Rule:
    """One quota from its dict; raises ``ValueError`` when it is not a valid quota."""
    per, target = _who_and_what(raw, _QUOTA_KEYS)
    quota, period = raw.get("quota"), raw.get("period")
    if not isinstance(quota, int) or isinstance(quota, bool) or not 0 < quota <= _MAX_COUNT:
        raise ValueError(f"quota {quota!r} must be a whole number from 1 to {_MAX_COUNT}")
    if period not in QUOTA_PERIODS:
        raise ValueError(f"period {period!r} is not one of {', '.join(QUOTA_PERIODS)}")
    name = _name(raw, f"{per} {target} per {period}")
    key = hashlib.blake2s(f"quota|{per}|{target}|{quota}/{period}".encode(), digest_size=6).hexdigest()
    longest = 86400 if period == "day" else _MAX_SECONDS
    window = Window(quota, longest, period)
    return Rule(per, target, f"{quota}/{period}", None, name, (window,), key, period)


def parse_quotas(raw: Any) -> tuple[Rule, ...]:
    """Every quota of ``QUOTAS`` (``None``: none); raises ``ValueError`` naming the first bad one."""
    if raw is None:
        return ()
    if not isinstance(raw, list | tuple):
        raise ValueError("QUOTAS must be a list of quotas (dicts) or None")
    quotas = []
    for index, item in enumerate(raw):
        try:
            quotas.append(parse_quota(item))
        except ValueError as exc:
            raise ValueError(f"quota {index}: {exc}") from None
    return tuple(quotas)


def calendar_period(period: str, now: float) -> tuple[str, int, int]:
    """``(label, seconds left, seconds long)`` of the UTC calendar ``period`` (day or month) holding the
    Unix time ``now``: ``("2026-07-28", ...)`` or ``("2026-07", ...)``."""
    moment = datetime.fromtimestamp(now, UTC)
    if period == "day":
        start = moment.replace(hour=0, minute=0, second=0, microsecond=0)
        label, length = start.strftime("%Y-%m-%d"), 86400
    else:
        start = moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        label, length = start.strftime("%Y-%m"), calendar.monthrange(start.year, start.month)[1] * 86400
    left = start.timestamp() + length - now
    return label, max(1, math.ceil(left)), length


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


_compiled: tuple[Any, Any, tuple[Rule, ...]] = (None, None, ())


def compiled_rules(raw: Any, quotas: Any = None) -> tuple[Rule, ...]:
    """:func:`parse_rules` of ``raw`` then :func:`parse_quotas` of ``quotas``, parsed once per settings
    object (an invalid list: none of its rules, the checks report it)."""
    global _compiled
    if _compiled[0] is not raw or _compiled[1] is not quotas:
        parsed: list[Rule] = []
        for parse, value in ((parse_rules, raw), (parse_quotas, quotas)):
            with contextlib.suppress(ValueError):
                parsed.extend(parse(value))
        _compiled = (raw, quotas, tuple(parsed))
    return _compiled[2]


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
    """The rules that count this request, for the ``pers`` that apply to its caller (a ``default`` rate
    rule stands in for no other rate rule, a ``default`` quota for no other quota)."""
    if not rules:
        return []
    subjects = _subjects(method, params)
    found = [r for r in rules if r.per in pers and r.target != "default" and _matches(r.target, subjects)]
    covered = {(r.per, r.period is None) for r in found}
    found += [
        r
        for r in rules
        if r.target == "default" and r.per in pers and (r.per, r.period is None) not in covered
    ]
    return found
