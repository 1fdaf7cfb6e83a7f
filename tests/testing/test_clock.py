"""The frozen clock the helpers move: keyword units, a timedelta or seconds, and ``set``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from duetime.testing import FrozenClock

T0 = datetime(2027, 1, 1, tzinfo=UTC)


def test_advance_by_units_a_timedelta_or_seconds() -> None:
    clock = FrozenClock(T0)
    assert clock.advance(hours=1) == T0 + timedelta(hours=1)
    assert clock.advance(days=1, minutes=30, seconds=5) == T0 + timedelta(
        days=1, hours=1, minutes=30, seconds=5
    )
    assert clock.advance(timedelta(minutes=1), seconds=1) == T0 + timedelta(
        days=1, hours=1, minutes=31, seconds=6
    )
    clock.set(T0)
    assert clock.advance(2.5) == T0 + timedelta(seconds=2.5)  # the existing API: seconds
    assert clock.advance(-2.5) == T0
    assert clock.now() == T0


def test_set_jumps_to_an_instant_kept_in_utc() -> None:
    clock = FrozenClock(T0)
    paris = datetime(2027, 3, 28, 3, 0, tzinfo=ZoneInfo("Europe/Paris"))
    assert clock.set(paris) == paris
    assert clock.now().tzinfo is UTC
    assert clock.now() == datetime(2027, 3, 28, 1, 0, tzinfo=UTC)


async def test_offset_to_reads_the_other_clock_as_of_the_middle_of_its_round_trip() -> None:
    from datetime import UTC, datetime, timedelta

    from duetime._clock import FrozenClock, offset_to

    clock = FrozenClock(datetime(2026, 11, 24, 12, tzinfo=UTC))

    async def database_now() -> datetime:
        return clock.now() + timedelta(seconds=5)

    offset, round_trip = await offset_to(database_now, clock)
    assert round_trip >= 0
    assert offset == timedelta(seconds=5) + timedelta(seconds=round_trip / 2)
