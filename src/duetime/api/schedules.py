"""``/api/v1/schedules/preview``: the next fire instants of a cron expression or of a job."""

from __future__ import annotations

from duetime.api.auth import Viewer
from duetime.api.endpoint import Endpoint
from duetime.api.schemas import OccurrenceOut, PreviewIn, PreviewOut, parse_id, utc
from duetime.errors import ValidationError


class PreviewSchedule(Endpoint):
    """Preview fire instants
    The next `count` instants of `cron` in `tz` strictly after `after` (default now), or of an
    existing job (`job_id`) from its next fire on — each in UTC and local time, with a note on
    occurrences a DST change moved or doubled."""

    method, path, tag = "POST", "/schedules/preview", "schedules"
    errors = (404, 422)

    async def handle(self, body: PreviewIn, caller: Viewer) -> PreviewOut:
        app = caller.app
        if body.job_id is not None:
            if body.cron is not None:
                raise ValidationError("cron", "give either cron or job_id, not both")
            job = await app.get(parse_id(body.job_id, "job"))
            occurrences = await app.next_fires(job.id, body.count)
            return PreviewOut(tz=job.schedule.tz, items=[OccurrenceOut.of(o) for o in occurrences])
        if body.cron is None:
            raise ValidationError("cron", "give a cron expression (or a job_id)")
        after = None if body.after is None else utc(body.after, "after")
        occurrences = app.preview(body.cron, tz=body.tz, after=after, count=body.count)
        return PreviewOut(tz=body.tz, items=[OccurrenceOut.of(o) for o in occurrences])


ENDPOINTS: tuple[type[Endpoint], ...] = (PreviewSchedule,)
