-- name: job_insert
INSERT INTO jobs (
    id, tenant, name, task, payload, schedule_kind, cron, tz, at_instant, every_us, anchor,
    status, priority, max_attempts, backoff_base, backoff_factor, backoff_cap, timeout_s,
    misfire_policy, misfire_grace_s, overlap_policy, delivery, queue, tags, metadata,
    partition_key, next_fire_at, created_at, updated_at, target, max_concurrency,
    concurrency_key, max_backfill, sla_s, expected_duration_s, jitter_s, declared_delay_us,
    every_count, every_unit,
    retry_rules, tzdata_version,
    start_at, end_at, max_runs, replace_timeout_s, max_waiting, calendars, calendar_shift
) VALUES (
    %(id)s, %(tenant)s, %(name)s, %(task)s, %(payload)s::json, %(schedule_kind)s, %(cron)s,
    %(tz)s, %(at_instant)s, %(every_us)s, %(anchor)s, 'active', %(priority)s, %(max_attempts)s,
    %(backoff_base)s, %(backoff_factor)s, %(backoff_cap)s, %(timeout_s)s, %(misfire_policy)s,
    %(misfire_grace_s)s, %(overlap_policy)s, %(delivery)s, %(queue)s, %(tags)s::jsonb,
    %(metadata)s::json, %(partition_key)s, %(next_fire_at)s, %(now)s, %(now)s,
    %(target)s::json, %(max_concurrency)s, %(concurrency_key)s, %(max_backfill)s,
    %(sla_s)s, %(expected_duration_s)s, %(jitter_s)s, %(declared_delay_us)s,
    %(every_count)s, %(every_unit)s,
    %(retry_rules)s::json, %(tzdata_version)s,
    %(start_at)s, %(end_at)s, %(max_runs)s, %(replace_timeout_s)s, %(max_waiting)s,
    %(calendars)s::jsonb, %(calendar_shift)s
)
ON CONFLICT (tenant, name) DO NOTHING
RETURNING *;

-- name: job_update
-- Returns the job with `next_occurrence_at` (next_occurrence_of_j): a kept schedule may have
-- runs written ahead.
UPDATE jobs j SET
    task = %(task)s, payload = %(payload)s::json, schedule_kind = %(schedule_kind)s,
    cron = %(cron)s, tz = %(tz)s, at_instant = %(at_instant)s, every_us = %(every_us)s,
    every_count = %(every_count)s, every_unit = %(every_unit)s,
    anchor = %(anchor)s, status = %(status)s, priority = %(priority)s,
    max_attempts = %(max_attempts)s, backoff_base = %(backoff_base)s,
    backoff_factor = %(backoff_factor)s, backoff_cap = %(backoff_cap)s,
    timeout_s = %(timeout_s)s, misfire_policy = %(misfire_policy)s,
    misfire_grace_s = %(misfire_grace_s)s, overlap_policy = %(overlap_policy)s,
    delivery = %(delivery)s, queue = %(queue)s, tags = %(tags)s::jsonb,
    metadata = %(metadata)s::json, next_fire_at = %(next_fire_at)s, updated_at = %(now)s,
    target = %(target)s::json, max_concurrency = %(max_concurrency)s,
    concurrency_key = %(concurrency_key)s, max_backfill = %(max_backfill)s,
    sla_s = %(sla_s)s, expected_duration_s = %(expected_duration_s)s, jitter_s = %(jitter_s)s,
    declared_delay_us = %(declared_delay_us)s,
    retry_rules = %(retry_rules)s::json,
    replace_timeout_s = %(replace_timeout_s)s, max_waiting = %(max_waiting)s,
    calendars = %(calendars)s::jsonb, calendar_shift = %(calendar_shift)s,
    start_at = %(start_at)s, end_at = %(end_at)s, max_runs = %(max_runs)s,
    -- the tzdata release of a next instant computed now; a kept one keeps its own
    tzdata_version = CASE WHEN j.next_fire_at IS NOT DISTINCT FROM %(next_fire_at)s::timestamptz
                          THEN j.tzdata_version ELSE %(tzdata_version)s END,
    -- the count starts when max_runs is first set (docs/api.md, "Bounds")
    runs_created = CASE WHEN %(max_runs)s::int IS NULL THEN 0 ELSE j.runs_created END
WHERE j.id = %(id)s
RETURNING j.*, {{next_occurrence_of_j}};

-- fragment: next_occurrence_of_j
-- `next_occurrence_at` of the job `j`: the earliest occurrence not fired yet — the scheduler
-- writes runs ahead of their instant and moves `next_fire_at` past them, so the earliest of
-- those never started (index runs_job_unfired) comes first when there is one.
LEAST(j.next_fire_at, (
    SELECT min(r.scheduled_for) FROM runs r
    WHERE r.job_id = j.id AND r.state IN ('scheduled', 'running') AND r.started_at IS NULL
      AND r.trigger = 'schedule'
)) AS next_occurrence_at

-- name: job_get_by_id
SELECT j.*, {{next_occurrence_of_j}} FROM jobs j WHERE j.tenant = %(tenant)s AND j.id = %(id)s;

-- name: job_get_by_name
SELECT j.*, {{next_occurrence_of_j}} FROM jobs j
WHERE j.tenant = %(tenant)s AND j.name = %(name)s;

-- name: job_lock_by_id
SELECT * FROM jobs WHERE tenant = %(tenant)s AND id = %(id)s FOR UPDATE;

-- name: job_lock_by_name
SELECT * FROM jobs WHERE tenant = %(tenant)s AND name = %(name)s FOR UPDATE;

-- name: job_list
-- The page first, then each of its jobs' earliest unfired run (one index probe per job).
SELECT j.*, {{next_occurrence_of_j}}
FROM (
    SELECT * FROM jobs
    WHERE tenant = %(tenant)s
      AND (%(status)s::text IS NULL OR status = %(status)s::text)
      AND (%(name_prefix)s::text IS NULL OR starts_with(name, %(name_prefix)s::text))
      AND (%(tag)s::text IS NULL OR tags ? %(tag)s::text)
      AND (%(after_name)s::text IS NULL OR name > %(after_name)s::text)
      -- A bound the index can seek to, generic plan included: without it a page walked every
      -- name before its cursor (its cost grew with its position). No text sorts before ''.
      AND name >= coalesce(%(after_name)s::text, '')
    ORDER BY name
    LIMIT %(limit)s
) j
ORDER BY j.name;

-- name: job_set_status
-- The pause note (paused_by, pause_note, paused_until) is the new status's: cleared unless
-- paused (decision 0023).
UPDATE jobs SET status = %(status)s, next_fire_at = %(next_fire_at)s, updated_at = %(now)s,
    paused_by = %(paused_by)s, pause_note = %(pause_note)s, paused_until = %(paused_until)s,
    tzdata_version = coalesce(%(tzdata_version)s::text, tzdata_version)
WHERE id = %(id)s AND status = ANY(%(from_states)s::text[])
RETURNING *;

-- name: job_delete_runs
-- A job's delete, first step (the job locked): its runs, returning their ids for
-- job_delete_attempts. Waits for a completion that holds one of them, so the next statement
-- sees the attempt it recorded.
DELETE FROM runs WHERE job_id = %(id)s RETURNING id;

-- name: job_delete_attempts
-- The attempts of the runs job_delete_runs deleted (%(ids)s): no foreign key cascades to them.
DELETE FROM attempts WHERE run_id = ANY(%(ids)s::uuid[]);

-- name: job_delete
-- Last: the job (its skip records go with it, ON DELETE CASCADE).
DELETE FROM jobs WHERE id = %(id)s;

-- name: jobs_due
SELECT * FROM jobs
WHERE status = 'active' AND next_fire_at IS NOT NULL AND next_fire_at <= %(until)s
  AND partition_key BETWEEN %(partition_low)s AND %(partition_high)s
ORDER BY next_fire_at
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: jobs_advance
-- The jobs reached through their primary key: joined to the batch, a batch of 500 was planned
-- as a hash join over a sequential scan of every job (tens of thousands: milliseconds). An
-- array from a subquery has no size the planner could weigh against the table's.
UPDATE jobs j SET next_fire_at = i.next_fire_at,
    tzdata_version = coalesce(%(tzdata_version)s::text, j.tzdata_version)
FROM unnest(%(ids)s::uuid[], %(next_fire_ats)s::timestamptz[]) AS i(id, next_fire_at)
WHERE j.id = ANY(ARRAY(SELECT unnest(%(ids)s::uuid[]))) AND j.id = i.id;

-- name: jobs_complete
UPDATE jobs SET status = 'completed', next_fire_at = NULL, updated_at = %(now)s
WHERE id = ANY(%(ids)s::uuid[]) AND status IN ('active', 'paused');

-- name: jobs_count_runs
-- Bounded jobs after a materialization, in its transaction (their rows locked by jobs_due):
-- the runs it created count against max_runs; a job flagged complete (no occurrence left
-- before end_at) or whose count reached max_runs becomes `completed`.
UPDATE jobs j SET
    runs_created = j.runs_created + i.added,
    status = CASE WHEN i.complete OR j.runs_created + i.added >= j.max_runs THEN 'completed'
                  ELSE j.status END,
    next_fire_at = CASE WHEN i.complete OR j.runs_created + i.added >= j.max_runs THEN NULL
                        ELSE j.next_fire_at END,
    updated_at = CASE WHEN i.complete OR j.runs_created + i.added >= j.max_runs THEN %(now)s
                      ELSE j.updated_at END
FROM unnest(%(ids)s::uuid[], %(added)s::int[], %(complete)s::bool[]) AS i(id, added, complete)
WHERE j.id = i.id AND j.status = 'active';

-- name: jobs_uncount_runs
-- Runs withdrawn before their instant (runs_withdraw_pending/_outside: paused, schedule
-- changed, out of bounds) give their count back; `count` is how many those deleted.
UPDATE jobs SET runs_created = greatest(runs_created - %(count)s, 0)
WHERE id = %(id)s AND max_runs IS NOT NULL;

-- name: job_last_occurrence
-- The latest occurrence of the job that fired: its scheduled runs but those a schedule change
-- skipped (a changed schedule's first instant comes after it). A backward walk of
-- runs_job_occurrence.
SELECT scheduled_for AS last FROM runs
WHERE job_id = %(job_id)s AND trigger = 'schedule'
  AND (state <> 'skipped' OR coalesce(reason, '') <> 'schedule_changed')
ORDER BY scheduled_for DESC
LIMIT 1;
