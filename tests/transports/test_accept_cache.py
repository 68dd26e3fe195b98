"""The parsed-``Accept`` cache (transports.rules.accepts) under hostile values: a flood of distinct values
keeps it bounded, an oversize value is answered without being kept, and each answer stays right."""

from __future__ import annotations

from mcp_server.transports.rules import _accepts, accepts

BOTH = ("application/json", "text/event-stream")


def test_a_flood_of_distinct_accept_values_keeps_the_cache_bounded() -> None:
    for n in range(2000):
        value = f"application/json, text/event-stream, x/{n}"
        assert accepts({"accept": value}, *BOTH)
    info = _accepts.cache_info()
    assert info.maxsize is not None
    assert info.currsize <= info.maxsize


def test_an_oversize_accept_value_is_answered_and_not_kept() -> None:
    huge = "application/json, " + ", ".join(f"y/{n}" for n in range(400)) + ", text/event-stream"
    assert len(huge) > 512
    _accepts.cache_clear()
    assert accepts({"accept": huge}, *BOTH)
    assert not accepts({"accept": huge.replace("text/event-stream", "text/plain")}, *BOTH)
    assert _accepts.cache_info().currsize == 0


def test_bad_bytes_and_wildcards_are_read_as_before() -> None:
    assert accepts({"accept": "*/*"}, *BOTH)
    assert accepts({"accept": "application/*;q=0.5, text/*"}, *BOTH)
    assert not accepts({"accept": "\x00\xff, ;;;,"}, *BOTH)
    assert not accepts({}, "application/json")
