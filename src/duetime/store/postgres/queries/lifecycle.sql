-- A job's lifecycle (docs/decisions/0023-job-lifecycle.md): pause notes and auto-resume,
-- pause on failure, its history (job_events), declared jobs (app.sync), tenants' job caps.

-- name: job_pause_note_set
-- A paused job's note changed (paused again with a note): nothing else moves.
UPDATE jobs SET paused_by = %(paused_by)s, pause_note = %(pause_note)s,
    paused_until = %(paused_until)s, updated_at = %(now)s
WHERE id = %(id)s AND status = 'paused'
RETURNING *;

-- name: job_event_insert
INSERT INTO job_events (job_id, at, kind, actor, detail)
VALUES (%(job_id)s, %(now)s, %(kind)s, %(actor)s, %(detail)s::jsonb);

-- name: job_events_list
-- Newest first; %(before)s (an event id) pages back.
SELECT e.* FROM job_events e JOIN jobs j ON j.id = e.job_id
WHERE j.tenant = %(tenant)s AND e.job_id = %(job_id)s
  AND (%(before)s::bigint IS NULL OR e.id < %(before)s::bigint)
ORDER BY e.id DESC
LIMIT %(limit)s;

-- name: jobs_pause_due
-- Paused jobs whose pause ends by %(now)s (jobs_pause_due index), every tenant.
SELECT * FROM jobs
WHERE status = 'paused' AND paused_until IS NOT NULL
  AND paused_until <= coalesce(%(now)s::timestamptz, clock_timestamp())
ORDER BY paused_until
LIMIT %(limit)s;

-- name: jobs_failing
-- Active jobs with pause on failure (jobs_pause_on_failure index) whose latest
-- `pause_after_dead` finished runs (by occurrence, newest first: runs_job_history, a walk that
-- stops after that many) are all dead and finished after `dead_count_from` (the last resume).
SELECT j.*, f.dead FROM jobs j
CROSS JOIN LATERAL (
    SELECT count(*) FILTER (
        WHERE last.state = 'dead'
          AND last.finished_at > coalesce(j.dead_count_from, '-infinity'::timestamptz)
    ) AS dead
    FROM (
        SELECT r.state, r.finished_at FROM runs r
        WHERE r.job_id = j.id AND r.state IN ('succeeded', 'dead')
        ORDER BY r.scheduled_for DESC
        LIMIT j.pause_after_dead
    ) last
) f
WHERE j.pause_after_dead IS NOT NULL AND j.status = 'active' AND f.dead >= j.pause_after_dead
ORDER BY j.id
LIMIT %(limit)s;

-- name: job_pause_on_failure_set
-- %(after)s NULL turns it off; the streak counts from now either way.
UPDATE jobs SET pause_after_dead = %(after)s, dead_count_from = %(now)s, updated_at = %(now)s
WHERE tenant = %(tenant)s AND id = %(id)s
RETURNING *;

-- name: job_dead_count_restart
-- A resumed job's dead streak counts from the resume.
UPDATE jobs SET dead_count_from = %(now)s WHERE id = %(id)s;

-- name: tenant_max_jobs_lock
-- A capped tenant's row, locked until the registration's transaction ends: inserts of its
-- jobs count and insert one at a time. Uncapped tenants lock nothing.
SELECT max_jobs FROM tenants WHERE id = %(tenant)s AND max_jobs IS NOT NULL FOR UPDATE;

-- name: tenant_jobs_count
-- Registered jobs (not cancelled) of the tenant, and whether %(name)s is one of its jobs.
SELECT count(*) FILTER (WHERE status <> 'cancelled') AS registered,
       count(*) FILTER (WHERE name = %(name)s) AS taken
FROM jobs WHERE tenant = %(tenant)s;

-- name: tenant_max_jobs_set
-- 0 removes the cap (stored as NULL).
INSERT INTO tenants (id, webhook_secret, max_jobs, created_at)
VALUES (%(tenant)s, %(secret)s, nullif(%(max_jobs)s::int, 0),
        coalesce(%(now)s::timestamptz, clock_timestamp()))
ON CONFLICT (id) DO UPDATE SET max_jobs = nullif(%(max_jobs)s::int, 0);

-- name: jobs_declared
-- The jobs a sync source declared (jobs_declared index).
SELECT * FROM jobs WHERE tenant = %(tenant)s AND declared_source = %(source)s ORDER BY name;

-- name: jobs_declare
-- Mark the named jobs as declared by %(source)s.
UPDATE jobs SET declared_source = %(source)s
WHERE tenant = %(tenant)s AND name = ANY(%(names)s::text[])
  AND declared_source IS DISTINCT FROM %(source)s;

-- name: jobs_paused_on_failure
-- Jobs pause on failure paused (`paused_by` 'duetime', which no caller may give): each is
-- an open `job_paused_on_failure` alert until resumed (jobs_paused_on_failure index).
SELECT * FROM jobs WHERE status = 'paused' AND paused_by = 'duetime' ORDER BY id LIMIT %(limit)s;

-- name: jobs_tz_stale
-- Active jobs whose next instant depends on zone rules (a cron or calendar-unit every in a
-- zone other than UTC) and was not computed with the given release (NULL: before v23), by
-- id after a cursor (the caller pages; it recomputes only older releases).
SELECT * FROM jobs
WHERE status = 'active' AND next_fire_at IS NOT NULL AND tz <> 'UTC'
  AND (schedule_kind = 'cron' OR (schedule_kind = 'every' AND every_unit IS NOT NULL))
  AND (tzdata_version IS NULL OR tzdata_version <> %(version)s)
  AND (%(after_id)s::uuid IS NULL OR id > %(after_id)s::uuid)
ORDER BY id
LIMIT %(limit)s;

-- name: job_tz_recompute
-- The job's next instant recomputed with the given release (the caller holds its lock).
UPDATE jobs SET next_fire_at = %(next_fire_at)s, tzdata_version = %(version)s,
    updated_at = %(now)s
WHERE id = %(id)s
RETURNING *;

-- name: tenant_names_taken
-- How many of the names (a bulk batch's) the tenant has already.
SELECT count(*) AS taken FROM jobs
WHERE tenant = %(tenant)s AND name = ANY(%(names)s::text[]);
