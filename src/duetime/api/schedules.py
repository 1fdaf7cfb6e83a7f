"""``/api/v1/schedules/preview``: the next fire instants of a cron expression, of an interval,
or of a job."""

from __future__ import annotations

from duetime.api.auth import Viewer
from duetime.api.endpoint import Endpoint
from duetime.api.schemas import (
    OccurrenceOut,
    PreviewIn,
    PreviewOut,
    parse_every,
    parse_id,
    utc,
)
from duetime.errors import ValidationError
from duetime.schedules import every_schedule, preview, validate_schedule


class PreviewSchedule(Endpoint):
    """Preview fire instants
    The next `count` instants strictly after `after` (default now) of `cron` in `tz`, of an
    interval `every` from `anchor` (default `after`; "1 day" and the other calendar units are
    stepped in `tz`), or of an existing job (`job_id`) from its next fire on — each in UTC and
    local time, with a note on occurrences a DST change moved or doubled."""

    method, path, tag = "POST", "/schedules/preview", "schedules"
    errors = (404, 422)

    async def handle(self, body: PreviewIn, caller: Viewer) -> PreviewOut:
        app = caller.app
        given = [f for f in ("cron", "every", "job_id") if getattr(body, f) is not None]
        if len(given) > 1:
            got = " and ".join(given)
            raise ValidationError(given[0], f"give one of cron, every or job_id (got {got})")
        if body.job_id is not None:
            job = await app.get(parse_id(body.job_id, "job"))
            occurrences = await app.next_fires(job.id, body.count)
            return PreviewOut(tz=job.schedule.tz, items=[OccurrenceOut.of(o) for o in occurrences])
        after = None if body.after is None else utc(body.after, "after")
        if body.every is not None:
            start = after or app.clock.now()
            anchor = start if body.anchor is None else utc(body.anchor, "anchor")
            schedule = every_schedule(parse_every(body.every), body.tz, anchor)
            validate_schedule(schedule, start)
            occurrences = preview(schedule, start, body.count)
            return PreviewOut(tz=body.tz, items=[OccurrenceOut.of(o) for o in occurrences])
        if body.cron is None:
            raise ValidationError("cron", "give a cron expression (or every, or a job_id)")
        occurrences = app.preview(body.cron, tz=body.tz, after=after, count=body.count)
        return PreviewOut(tz=body.tz, items=[OccurrenceOut.of(o) for o in occurrences])


ENDPOINTS: tuple[type[Endpoint], ...] = (PreviewSchedule,)
