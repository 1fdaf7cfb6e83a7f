-- A job's lifecycle (docs/decisions/0023-job-lifecycle.md): pause notes and auto-resume,
-- pause on failure, its history (job_events), declared jobs (app.sync), tenants' job caps.

-- name: job_pause_note_set
-- A paused job's note changed (paused again with a note): nothing else moves.
UPDATE jobs SET paused_by = :paused_by, pause_note = :pause_note,
    paused_until = :paused_until, updated_at = :now
WHERE id = :id AND status = 'paused'
RETURNING *;

-- name: job_event_insert
INSERT INTO job_events (job_id, at, kind, actor, detail)
VALUES (:job_id, :now, :kind, :actor, :detail);

-- name: job_events_list
-- Newest first; :before (an event id) pages back.
SELECT e.* FROM job_events e JOIN jobs j ON j.id = e.job_id
WHERE j.tenant = :tenant AND e.job_id = :job_id AND (:before IS NULL OR e.id < :before)
ORDER BY e.id DESC
LIMIT :limit;

-- name: jobs_pause_due
-- Paused jobs whose pause ends by :now (jobs_pause_due index), every tenant.
SELECT * FROM jobs
WHERE status = 'paused' AND paused_until IS NOT NULL AND paused_until <= :now
ORDER BY paused_until
LIMIT :limit;

-- name: jobs_failing
-- Active jobs with pause on failure (jobs_pause_on_failure index) whose latest
-- `pause_after_dead` finished runs (by occurrence, newest first) are all dead and finished
-- after `dead_count_from` (the last resume). SQLite's LIMIT cannot name the job's column:
-- the newest 1000 (the option's maximum) are numbered instead.
SELECT * FROM (
    SELECT j.*, (
        SELECT count(*) FROM (
            SELECT newest.state, newest.finished_at,
                   row_number() OVER (ORDER BY newest.scheduled_for DESC) AS rn
            FROM (
                SELECT r.state, r.finished_at, r.scheduled_for FROM runs r
                WHERE r.job_id = j.id AND r.state IN ('succeeded', 'dead')
                ORDER BY r.scheduled_for DESC
                LIMIT 1000
            ) newest
        ) last
        WHERE last.rn <= j.pause_after_dead AND last.state = 'dead'
          AND last.finished_at > coalesce(j.dead_count_from, -9223372036854775807)
    ) AS dead
    FROM jobs j
    WHERE j.pause_after_dead IS NOT NULL AND j.status = 'active'
)
WHERE dead >= pause_after_dead
ORDER BY id
LIMIT :limit;

-- name: job_pause_on_failure_set
-- :after NULL turns it off; the streak counts from now either way.
UPDATE jobs SET pause_after_dead = :after, dead_count_from = :now, updated_at = :now
WHERE tenant = :tenant AND id = :id
RETURNING *;

-- name: job_dead_count_restart
-- A resumed job's dead streak counts from the resume.
UPDATE jobs SET dead_count_from = :now WHERE id = :id;

-- name: tenant_max_jobs_lock
-- A capped tenant's cap (BEGIN IMMEDIATE already serializes the registrations).
SELECT max_jobs FROM tenants WHERE id = :tenant AND max_jobs IS NOT NULL;

-- name: tenant_jobs_count
-- Registered jobs (not cancelled) of the tenant, and whether :name is one of its jobs.
SELECT count(*) FILTER (WHERE status <> 'cancelled') AS registered,
       count(*) FILTER (WHERE name = :name) AS taken
FROM jobs WHERE tenant = :tenant;

-- name: tenant_max_jobs_set
-- 0 removes the cap (stored as NULL).
INSERT INTO tenants (id, webhook_secret, max_jobs, created_at)
VALUES (:tenant, :secret, nullif(:max_jobs, 0), :now)
ON CONFLICT (id) DO UPDATE SET max_jobs = nullif(:max_jobs, 0);

-- name: jobs_declared
-- The jobs a sync source declared (jobs_declared index).
SELECT * FROM jobs WHERE tenant = :tenant AND declared_source = :source ORDER BY name;

-- name: jobs_declare
-- Mark the named jobs as declared by :source.
UPDATE jobs SET declared_source = :source
WHERE tenant = :tenant AND name IN (SELECT value FROM json_each(:names))
  AND declared_source IS NOT :source;

-- name: jobs_paused_on_failure
-- Jobs pause on failure paused (`paused_by` 'duetime', which no caller may give): each is
-- an open `job_paused_on_failure` alert until resumed (jobs_paused_on_failure index).
SELECT * FROM jobs WHERE status = 'paused' AND paused_by = 'duetime' ORDER BY id LIMIT :limit;

-- name: jobs_tz_stale
-- Active jobs whose next instant depends on zone rules (a cron or calendar-unit every in a
-- zone other than UTC) and was not computed with the given release (NULL: before v23), by
-- id after a cursor (the caller pages; it recomputes only older releases).
SELECT * FROM jobs
WHERE status = 'active' AND next_fire_at IS NOT NULL AND tz <> 'UTC'
  AND (schedule_kind = 'cron' OR (schedule_kind = 'every' AND every_unit IS NOT NULL))
  AND (tzdata_version IS NULL OR tzdata_version <> :version)
  AND (:after_id IS NULL OR id > :after_id)
ORDER BY id
LIMIT :limit;

-- name: job_tz_recompute
-- The job's next instant recomputed with the given release (the caller holds its lock).
UPDATE jobs SET next_fire_at = :next_fire_at, tzdata_version = :version,
    updated_at = :now
WHERE id = :id
RETURNING *;

-- name: tenant_names_taken
-- How many of the names (a bulk batch's, a JSON array) the tenant has already.
SELECT count(*) AS taken FROM jobs
WHERE tenant = :tenant AND name IN (SELECT value FROM json_each(:names));
