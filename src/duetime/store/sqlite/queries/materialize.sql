-- The set path of the materializer (docs/decisions/0038; see the PostgreSQL dialect): the runs
-- of due plain one-shot jobs made in the database. Two statements in the caller's BEGIN
-- IMMEDIATE (which holds the database): the runs of the first :limit plain jobs due, then the
-- same jobs advanced (the same selection: nothing changed the jobs in between, and the order
-- is total).

-- fragment: plain_due_sqlite
j.status = 'active' AND j.next_fire_at IS NOT NULL AND j.next_fire_at <= :until
  AND j.partition_key BETWEEN :partition_low AND :partition_high
  AND j.schedule_kind IN ('now', 'at') AND j.calendars IS NULL AND j.jitter_s = 0
  AND j.max_runs IS NULL AND j.start_at IS NULL AND j.end_at IS NULL
  AND j.overlap_policy <> 'replace' AND j.task <> :workflow_task
  AND (j.next_fire_at >= :now - CAST(round(j.misfire_grace_s * 1000000) AS INTEGER)
       OR j.created_at >= j.next_fire_at)

-- fragment: plain_leased_sqlite
  AND j.partition_key IN (
      SELECT partition_key FROM partition_leases WHERE owner = :owner AND expires_at > :now
  )

-- fragment: plain_runs_sqlite
-- store/_values.py planned_run_values, column for column; the id a random (version 4) UUID.
-- The grace in microseconds is rounded, as timedelta rounds it (truncated, 1.005 s was 1 µs
-- short).
INSERT INTO runs (
    id, job_id, tenant, job_name, task, queue, payload, scheduled_for, available_at, state,
    priority, max_attempts, backoff_base, backoff_factor, backoff_cap, timeout_s, delivery,
    one_shot, trigger, created_at, target, concurrency_key, misfire_at, retry_rules
)
SELECT * FROM (
    SELECT lower(hex(randomblob(4))) || '-' || lower(hex(randomblob(2))) || '-4'
               || substr(lower(hex(randomblob(2))), 2) || '-'
               || substr('89ab', 1 + (random() & 3), 1)
               || substr(lower(hex(randomblob(2))), 2) || '-' || lower(hex(randomblob(6))),
           j.id, j.tenant, j.name, j.task, j.queue, j.payload, j.next_fire_at, j.next_fire_at,
           'scheduled', j.priority, j.max_attempts, j.backoff_base, j.backoff_factor,
           j.backoff_cap, j.timeout_s, j.delivery, 1, 'schedule', :now, j.target,
           CASE WHEN j.concurrency_key IS NOT NULL THEN 'key:' || j.concurrency_key
                WHEN j.overlap_policy = 'allow' AND j.max_concurrency = 0 THEN NULL
                ELSE 'job:' || j.id END,
           CASE WHEN j.misfire_policy IN ('backfill', 'fire_once') THEN NULL
                ELSE j.next_fire_at + CAST(round(j.misfire_grace_s * 1000000) AS INTEGER) END,
           j.retry_rules
    FROM jobs j

-- name: runs_materialize_plain
-- The runs of the first :limit due plain one-shots (an existing occurrence left alone):
-- (tenant, task, scheduled_for) of each new one.
{{plain_runs_sqlite}}
    WHERE {{plain_due_sqlite}}
    ORDER BY j.next_fire_at, j.id
    LIMIT :limit
)
WHERE true  -- an INSERT … SELECT needs a WHERE before ON CONFLICT
ON CONFLICT DO NOTHING
RETURNING tenant, task, scheduled_for;

-- name: runs_materialize_plain_leased
-- runs_materialize_plain for a node serving leased partitions (as jobs_due_leased).
{{plain_runs_sqlite}}
    WHERE {{plain_due_sqlite}}
    {{plain_leased_sqlite}}
    ORDER BY j.next_fire_at, j.id
    LIMIT :limit
)
WHERE true  -- an INSERT … SELECT needs a WHERE before ON CONFLICT
ON CONFLICT DO NOTHING
RETURNING tenant, task, scheduled_for;

-- name: jobs_advance_plain
-- The jobs runs_materialize_plain just made runs for, advanced past their one occurrence.
UPDATE jobs SET next_fire_at = NULL, tzdata_version = coalesce(:tzdata_version, tzdata_version)
WHERE id IN (
    SELECT j.id FROM jobs j
    WHERE {{plain_due_sqlite}}
    ORDER BY j.next_fire_at, j.id
    LIMIT :limit
);

-- name: jobs_advance_plain_leased
UPDATE jobs SET next_fire_at = NULL, tzdata_version = coalesce(:tzdata_version, tzdata_version)
WHERE id IN (
    SELECT j.id FROM jobs j
    WHERE {{plain_due_sqlite}}
    {{plain_leased_sqlite}}
    ORDER BY j.next_fire_at, j.id
    LIMIT :limit
);
