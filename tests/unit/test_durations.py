"""The one duration parser (``duetime._durations``), shared by the CLI and the REST API."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from duetime._durations import iso_duration_seconds, parse_duration, short_duration_seconds
from duetime.api.schemas import parse_duration as api_parse_duration
from duetime.errors import ValidationError

ISO = [
    ("PT3H", 10800),
    ("pt1.5s", 1.5),
    ("P1DT2H30M", 95400),
    ("P2W", 1209600),
    ("P1D", 86400),
    (" PT15M ", 900),
]
SHORT = [("90s", 90), ("1h30m", 5400), ("2d", 172800), ("0.5m", 30), ("1W", 604800)]
NEITHER = ["", "P", "PT", "P1DT", "P1M", "P1Y", "90", "h", "-5s", "1h 30m", "2026-01-01T00:00:00Z"]


@pytest.mark.parametrize(("text", "seconds"), ISO + SHORT)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", NEITHER)
def test_not_durations(text: str) -> None:
    assert parse_duration(text) is None
    assert parse_duration(text, short_forms=False) is None


@pytest.mark.parametrize(("text", "seconds"), ISO)
def test_iso_only(text: str, seconds: float) -> None:
    assert parse_duration(text, short_forms=False) == timedelta(seconds=seconds)
    assert iso_duration_seconds(text) == seconds
    assert short_duration_seconds(text) is None


@pytest.mark.parametrize(("text", "seconds"), SHORT)
def test_short_forms_only_when_allowed(text: str, seconds: float) -> None:
    assert parse_duration(text, short_forms=False) is None
    assert iso_duration_seconds(text) is None
    assert short_duration_seconds(text) == seconds


def test_too_long_for_a_timedelta_is_not_a_duration() -> None:
    assert parse_duration("P99999999999W") is None
    assert parse_duration("99999999999w") is None
    assert iso_duration_seconds("PT" + "9" * 400 + "S") == math.inf


def test_rest_api_accepts_iso_only_and_bounds_it() -> None:
    assert api_parse_duration("PT15M", "every") == timedelta(minutes=15)
    with pytest.raises(ValidationError, match="not an ISO 8601 duration"):
        api_parse_duration("15m", "every")
    with pytest.raises(ValidationError, match="at most"):
        api_parse_duration("P99999999999W", "every")
    with pytest.raises(ValidationError, match="at most"):
        api_parse_duration("PT" + "9" * 400 + "S", "at")
