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
    :id, :tenant, :name, :task, :payload, :schedule_kind, :cron, :tz, :at_instant, :every_us,
    :anchor, 'active', :priority, :max_attempts, :backoff_base, :backoff_factor, :backoff_cap,
    :timeout_s, :misfire_policy, :misfire_grace_s, :overlap_policy, :delivery, :queue, :tags,
    :metadata, :partition_key, :next_fire_at, :now, :now, :target, :max_concurrency,
    :concurrency_key, :max_backfill, :sla_s, :expected_duration_s, :jitter_s, :declared_delay_us,
    :every_count, :every_unit,
    :retry_rules, :tzdata_version,
    :start_at, :end_at, :max_runs, :replace_timeout_s, :max_waiting, :calendars, :calendar_shift
)
ON CONFLICT (tenant, name) DO NOTHING
RETURNING *;

-- name: job_update
-- Returns the job with `next_occurrence_at` (next_occurrence_of_j): a kept schedule may have
-- runs written ahead.
UPDATE jobs SET
    task = :task, payload = :payload, schedule_kind = :schedule_kind, cron = :cron, tz = :tz,
    at_instant = :at_instant, every_us = :every_us, anchor = :anchor, status = :status,
    every_count = :every_count, every_unit = :every_unit,
    priority = :priority, max_attempts = :max_attempts, backoff_base = :backoff_base,
    backoff_factor = :backoff_factor, backoff_cap = :backoff_cap, timeout_s = :timeout_s,
    misfire_policy = :misfire_policy, misfire_grace_s = :misfire_grace_s,
    overlap_policy = :overlap_policy, delivery = :delivery, queue = :queue, tags = :tags,
    metadata = :metadata, next_fire_at = :next_fire_at, updated_at = :now, target = :target,
    retry_rules = :retry_rules,
    max_concurrency = :max_concurrency, concurrency_key = :concurrency_key,
    max_backfill = :max_backfill, sla_s = :sla_s, expected_duration_s = :expected_duration_s,
    jitter_s = :jitter_s, declared_delay_us = :declared_delay_us, start_at = :start_at,
    end_at = :end_at, max_runs = :max_runs, replace_timeout_s = :replace_timeout_s,
    max_waiting = :max_waiting, calendars = :calendars, calendar_shift = :calendar_shift,
    -- the tzdata release of a next instant computed now; a kept one keeps its own
    tzdata_version = CASE WHEN next_fire_at IS :next_fire_at THEN tzdata_version
                          ELSE :tzdata_version END,
    -- the count starts when max_runs is first set (docs/api.md, "Bounds")
    runs_created = CASE WHEN :max_runs IS NULL THEN 0 ELSE runs_created END
WHERE id = :id
-- next_occurrence_of_j spelled for `jobs`: SQLite's RETURNING cannot name the table's alias
RETURNING *, (
    SELECT min(t) FROM (
        SELECT jobs.next_fire_at AS t
        UNION ALL
        SELECT min(r.scheduled_for) FROM runs r
        WHERE r.job_id = jobs.id AND r.state IN ('scheduled', 'running') AND r.started_at IS NULL
          AND r.trigger = 'schedule'
    )
) AS next_occurrence_at;

-- fragment: next_occurrence_of_j
-- `next_occurrence_at` of the job `j`: the earliest occurrence not fired yet — the scheduler
-- writes runs ahead of their instant and moves `next_fire_at` past them, so the earliest of
-- those never started (index runs_job_unfired) comes first when there is one.
(
    SELECT min(t) FROM (
        SELECT j.next_fire_at AS t
        UNION ALL
        SELECT min(r.scheduled_for) FROM runs r
        WHERE r.job_id = j.id AND r.state IN ('scheduled', 'running') AND r.started_at IS NULL
          AND r.trigger = 'schedule'
    )
) AS next_occurrence_at

-- name: job_get_by_id
SELECT j.*, {{next_occurrence_of_j}} FROM jobs j WHERE j.tenant = :tenant AND j.id = :id;

-- name: job_get_by_name
SELECT j.*, {{next_occurrence_of_j}} FROM jobs j WHERE j.tenant = :tenant AND j.name = :name;

-- name: job_lock_by_id
-- No row locks in SQLite: the caller's BEGIN IMMEDIATE already holds the database.
SELECT * FROM jobs WHERE tenant = :tenant AND id = :id;

-- name: job_lock_by_name
SELECT * FROM jobs WHERE tenant = :tenant AND name = :name;

-- name: job_list
-- The page first, then each of its jobs' earliest unfired run (one index probe per job).
SELECT j.*, {{next_occurrence_of_j}}
FROM (
    SELECT * FROM jobs
    WHERE tenant = :tenant
      AND (:status IS NULL OR status = :status)
      -- The index range: SQLite seeks (tenant, name) only on bounds that are plain values,
      -- never on an "IS NULL OR" (that walked every earlier name: a page's cost grew with its
      -- position). An empty BLOB sorts after every text.
      AND name >= max(coalesce(:name_prefix, ''), coalesce(:after_name, ''))
      AND name < coalesce(:name_until, x'')
      AND (:name_prefix IS NULL OR substr(name, 1, length(:name_prefix)) = :name_prefix)
      AND (:tag IS NULL OR EXISTS (SELECT 1 FROM json_each(jobs.tags) WHERE value = :tag))
      AND (:after_name IS NULL OR name > :after_name)
    ORDER BY name
    LIMIT :limit
) j
ORDER BY j.name;

-- name: job_set_status
-- The pause note (paused_by, pause_note, paused_until) is the new status's: cleared unless
-- paused (decision 0023).
UPDATE jobs SET status = :status, next_fire_at = :next_fire_at, updated_at = :now,
    paused_by = :paused_by, pause_note = :pause_note, paused_until = :paused_until,
    tzdata_version = coalesce(:tzdata_version, tzdata_version)
WHERE id = :id AND status IN (SELECT value FROM json_each(:from_states))
RETURNING *;

-- name: job_delete_runs
-- A job's delete, first step: its runs, returning their ids for job_delete_attempts.
DELETE FROM runs WHERE job_id = :id RETURNING id;

-- name: job_delete_attempts
-- The attempts of the runs job_delete_runs deleted (:ids, a JSON array): no foreign key
-- cascades to them.
DELETE FROM attempts WHERE run_id IN (SELECT value FROM json_each(:ids));

-- name: job_delete
-- Last: the job (its skip records go with it, ON DELETE CASCADE).
DELETE FROM jobs WHERE id = :id;

-- name: jobs_due
SELECT * FROM jobs
WHERE status = 'active' AND next_fire_at IS NOT NULL AND next_fire_at <= :until
  AND partition_key BETWEEN :partition_low AND :partition_high
ORDER BY next_fire_at
LIMIT :limit;

-- name: jobs_advance
-- `ids` and `next_fire_ats`: JSON arrays, element k of one for element k of the other. The
-- second array is materialized first (SQLite then indexes it on `key`): joined as it comes,
-- each element of one walked the other (45 ms for 500 jobs).
WITH n AS MATERIALIZED (SELECT key, value FROM json_each(:next_fire_ats))
UPDATE jobs SET next_fire_at = n.value, tzdata_version = coalesce(:tzdata_version, tzdata_version)
FROM json_each(:ids) AS i JOIN n ON n.key = i.key
WHERE jobs.id = i.value;

-- name: jobs_complete
-- One-shot jobs whose run ended (`ids`: a JSON array), in the completion's transaction.
UPDATE jobs SET status = 'completed', next_fire_at = NULL, updated_at = :now
WHERE id IN (SELECT value FROM json_each(:ids)) AND status IN ('active', 'paused');

-- name: jobs_count_runs
-- Bounded jobs after a materialization, in its transaction: `ids`, `added`, `complete` are
-- JSON arrays, element k of each for one job (see the PostgreSQL dialect); the second and
-- third materialized first, as in jobs_advance.
WITH a AS MATERIALIZED (SELECT key, value FROM json_each(:added)),
c AS MATERIALIZED (SELECT key, value FROM json_each(:complete))
UPDATE jobs SET
    runs_created = runs_created + a.value,
    status = CASE WHEN c.value OR runs_created + a.value >= max_runs THEN 'completed'
                  ELSE status END,
    next_fire_at = CASE WHEN c.value OR runs_created + a.value >= max_runs THEN NULL
                        ELSE next_fire_at END,
    updated_at = CASE WHEN c.value OR runs_created + a.value >= max_runs THEN :now
                      ELSE updated_at END
FROM json_each(:ids) AS i
JOIN a ON a.key = i.key
JOIN c ON c.key = i.key
WHERE jobs.id = i.value AND jobs.status = 'active';

-- name: jobs_uncount_runs
-- Runs withdrawn before their instant (runs_withdraw_pending/_outside: paused, schedule
-- changed, out of bounds) give their count back; `count` is how many those deleted.
UPDATE jobs SET runs_created = max(runs_created - :count, 0)
WHERE id = :id AND max_runs IS NOT NULL;

-- name: job_last_occurrence
-- The latest occurrence of the job that fired: its scheduled runs but those a schedule change
-- skipped (a changed schedule's first instant comes after it).
SELECT scheduled_for AS last FROM runs
WHERE job_id = :job_id AND trigger = 'schedule'
  AND (state <> 'skipped' OR coalesce(reason, '') <> 'schedule_changed')
ORDER BY scheduled_for DESC
LIMIT 1;
