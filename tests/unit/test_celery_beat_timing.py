"""A celery crontab and the cron expression the importer writes for it fire at the same
instants: celery's own next-run arithmetic (``remaining_estimate``) against duetime's
preview, over 200 instants each (UTC, where no DST rule applies)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from duetime._types import Schedule, ScheduleKind
from duetime.importers.celery_beat import crontab_expression
from duetime.schedules import preview

celery = pytest.importorskip("celery")
schedules = pytest.importorskip("celery.schedules")

START = datetime(2027, 1, 1, tzinfo=UTC)
COUNT = 200


def celery_instants(entry: Any, count: int) -> list[datetime]:
    """The next ``count`` instants celery beat would send ``entry`` at, from START."""
    out, now = [], START
    for _ in range(count):
        entry.nowfun = lambda at=now: at
        now = now + entry.remaining_estimate(now)
        out.append(now)
        now += timedelta(seconds=1)  # just past the instant sent: the next one is after it
    return out


@pytest.mark.parametrize(
    "fields",
    [
        {"minute": "*/15"},
        {"minute": "*/15", "hour": "9-17/2", "day_of_week": "mon-fri"},
        {"minute": 30, "hour": 7, "day_of_month": "1,15"},
        {"minute": 0, "hour": 0, "day_of_month": "*/2", "day_of_week": "sat,sun"},
        {"minute": 5, "hour": 4, "day_of_month": 1, "month_of_year": "*/3"},
        {"minute": "0,30", "hour": "*/6", "day_of_week": "sunday"},
    ],
    ids=str,
)
def test_the_same_instants_as_celery(fields: dict[str, Any]) -> None:
    app = celery.Celery("timing")
    app.conf.timezone = "UTC"
    entry = schedules.crontab(app=app, **fields)
    cron = crontab_expression(entry)
    ours = [
        o.instant for o in preview(Schedule(ScheduleKind.CRON, cron=cron, tz="UTC"), START, COUNT)
    ]
    # preview is strictly after START; celery may send at START itself: compare from the first
    # instant after it
    theirs = [t for t in celery_instants(entry, COUNT + 1) if t > START][:COUNT]
    assert ours == theirs, cron
