"""tzdata upgrades (SPEC §5, decision 0023) with zone rules of the test's own: two tzdata-like
directories (releases 2099a and 2099b) whose zone ``Test/Land`` is UTC+2, then UTC+3. A job
computed with 2099a is recomputed, once, by a scheduler that starts with 2099b: its runs not
yet due are withdrawn, its next instant is its occurrence under the new rules, and its history
says so. Both stores, a frozen clock."""

from __future__ import annotations

import struct
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from duetime._clock import FrozenClock
from duetime.app.tz_upgrade import TzdataUpgrade
from duetime.errors import ValidationError
from duetime.schedules import load_zone, tzdb
from duetime.testing import FrozenApp

ZONE = "Test/Land"
NOW = datetime(2030, 6, 3, 9, 59, 55, tzinfo=UTC)
"""12:00 is 10:00Z under 2099a (UTC+2), 09:00Z under 2099b (UTC+3)."""


def tzif(hours: int, abbreviation: bytes = b"TLT") -> bytes:
    """A TZif (version 2) file of one fixed offset: no transitions, one local time type, and
    the POSIX TZ footer (whose sign is the other way round)."""
    counts = struct.pack(">6l", 0, 0, 0, 0, 1, len(abbreviation) + 1)
    header = b"TZif2" + bytes(15) + counts
    data = struct.pack(">lBB", hours * 3600, 0, 0) + abbreviation + b"\0"
    footer = b"\n" + abbreviation + f"{-hours}".encode() + b"\n"
    return header + data + header + data + footer


def rules(root: Path, version: str, hours: int) -> tzdb.TzDatabase:
    (root / "Test").mkdir(parents=True)
    (root / "Test" / "Land").write_bytes(tzif(hours))
    (root / "UTC").write_bytes(tzif(0, b"UTC"))
    (root / "tzdata.zi").write_text(f"# version {version}\n# test rules\n")
    return tzdb.TzDatabase.from_directory(root)


@pytest.fixture
def release_a(tmp_path: Path) -> Iterator[tzdb.TzDatabase]:
    database = rules(tmp_path / "a", "2099a", 2)
    tzdb.use(database)
    yield database
    tzdb.use(None)


@pytest.fixture
def release_b(tmp_path: Path) -> tzdb.TzDatabase:
    return rules(tmp_path / "b", "2099b", 3)


@pytest.fixture
def release_c(tmp_path: Path) -> tzdb.TzDatabase:
    return rules(tmp_path / "c", "2099c", 1)


@pytest.fixture
async def app(store_url: str, release_a: tzdb.TzDatabase) -> AsyncIterator[FrozenApp]:
    opened = FrozenApp(store_url, clock=FrozenClock(NOW))
    async with opened:
        yield opened


def test_zones_come_from_the_rules_in_use_never_the_hosts(
    release_a: tzdb.TzDatabase, release_b: tzdb.TzDatabase
) -> None:
    assert load_zone(ZONE).utcoffset(NOW) == timedelta(hours=2)
    with pytest.raises(ValidationError, match="unknown time zone 'Europe/London'"):
        load_zone("Europe/London")  # the host has it; the rules in use do not
    tzdb.use(release_b)
    assert load_zone(ZONE).utcoffset(NOW) == timedelta(hours=3)
    tzdb.use(None)
    assert tzdb.current().version == tzdb.TzDatabase.packaged().version
    with pytest.raises(ValueError, match=r"no tzdata\.zi"):
        tzdb.TzDatabase.at(release_b.root.joinpath("Test"))


async def test_a_newer_release_recomputes_zoned_jobs_once(
    app: FrozenApp, release_b: tzdb.TzDatabase
) -> None:
    job = await app.schedule("noon", task="duetime.noop", cron="0 12 * * *", tz=ZONE)
    utc_job = await app.schedule("utc", task="duetime.noop", cron="0 12 * * *")
    assert job.next_fire_at == datetime(2030, 6, 3, 10, tzinfo=UTC)
    assert job.tzdata_version == "2099a"
    await app.materializer().run_once()  # writes the run at 10:00Z (within the horizon)
    assert [r.scheduled_for for r in (await app.runs(job.id)).items] == [job.next_fire_at]
    assert (await app.get(job.id)).tzdata_version == "2099a"

    tzdb.use(release_b)  # a process that starts with 2099b
    assert await TzdataUpgrade(app.store, app.clock).run_once() == 1
    moved = await app.get(job.id)
    assert moved.next_fire_at == datetime(2030, 6, 4, 9, tzinfo=UTC)  # 12:00 at UTC+3
    assert moved.tzdata_version == "2099b"
    assert (await app.runs(job.id)).items == []  # the run at 10:00Z was not due yet
    [event, *_] = await app.job_history(job.id)
    assert event.kind == "tzdata_recomputed"
    assert event.actor == "duetime"
    assert event.detail["from"] == "2099a"
    assert event.detail["to"] == "2099b"
    assert event.detail["runs_withdrawn"] == 1
    assert (await app.get(utc_job.id)).next_fire_at == utc_job.next_fire_at
    assert await TzdataUpgrade(app.store, app.clock).run_once() == 0  # once

    tzdb.use(tzdb.TzDatabase(release_b.version, release_b.root))
    await app.materializer().run_once()
    assert (await app.get(job.id)).tzdata_version == "2099b"


async def test_an_older_release_leaves_newer_jobs_alone(
    app: FrozenApp, release_a: tzdb.TzDatabase, release_b: tzdb.TzDatabase
) -> None:
    tzdb.use(release_b)
    job = await app.schedule("noon", task="duetime.noop", cron="0 12 * * *", tz=ZONE)
    assert job.tzdata_version == "2099b"
    tzdb.use(release_a)  # a node of the previous release starts
    assert await TzdataUpgrade(app.store, app.clock).run_once() == 0
    assert (await app.get(job.id)).next_fire_at == job.next_fire_at


async def test_a_job_behind_keeps_its_backlog_under_the_new_rules(
    app: FrozenApp, release_c: tzdb.TzDatabase
) -> None:
    job = await app.schedule("noon", task="duetime.noop", cron="0 12 * * *", tz=ZONE)
    assert job.next_fire_at == datetime(2030, 6, 3, 10, tzinfo=UTC)
    app.clock.advance(timedelta(days=2))  # the scheduler was down: the job is behind
    tzdb.use(release_c)  # UTC+1: that noon is 11:00Z
    assert await TzdataUpgrade(app.store, app.clock).run_once() == 1
    # still behind, at the same occurrence under the new rules: misfire decides what runs
    assert (await app.get(job.id)).next_fire_at == datetime(2030, 6, 3, 11, tzinfo=UTC)
