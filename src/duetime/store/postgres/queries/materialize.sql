-- The set path of the materializer (docs/decisions/0038): the runs of due *plain* one-shot jobs
-- made in the database, no job read into Python. A plain one-shot is what the planner
-- (scheduler/planner.py) would turn into exactly one run at `next_fire_at`, available then,
-- with no skip and no other write: an `at`/`now` job with no calendar, no jitter, no bounds,
-- not a workflow, not `replace`, and not missed (its instant within its misfire grace of now,
-- or the job registered after it). Everything else stays on the planner's path (jobs_due).

-- fragment: plain_due
-- The plain one-shot jobs due by %(until)s among the jobs_due rows (the same index range).
j.status = 'active' AND j.next_fire_at IS NOT NULL AND j.next_fire_at <= %(until)s
  AND j.partition_key BETWEEN %(partition_low)s AND %(partition_high)s
  AND j.schedule_kind IN ('now', 'at') AND j.calendars IS NULL AND j.jitter_s = 0
  AND j.max_runs IS NULL AND j.start_at IS NULL AND j.end_at IS NULL
  AND j.overlap_policy <> 'replace' AND j.task <> %(workflow_task)s
  AND (j.next_fire_at >= %(now)s::timestamptz - make_interval(secs => j.misfire_grace_s)
       OR j.created_at >= j.next_fire_at)

-- fragment: plain_made
-- The runs of the locked jobs in `due` (store/_values.py planned_run_values, column for
-- column: a test holds the two together), an existing occurrence left alone; the jobs
-- advanced past their one occurrence (next_fire_at NULL: a one-shot completes when its run
-- ends); the answer: the jobs taken, and the new runs counted by (tenant, task, instant), with
-- NOTIFY when there are any.
made AS (
    INSERT INTO runs (
        id, job_id, tenant, job_name, task, queue, payload, scheduled_for, available_at, state,
        priority, max_attempts, backoff_base, backoff_factor, backoff_cap, timeout_s, delivery,
        one_shot, trigger, created_at, target, concurrency_key, misfire_at, retry_rules,
        partition_key
    )
    SELECT gen_random_uuid(), d.id, d.tenant, d.name, d.task, d.queue, d.payload,
           d.next_fire_at, d.next_fire_at, 'scheduled', d.priority, d.max_attempts,
           d.backoff_base, d.backoff_factor, d.backoff_cap, d.timeout_s, d.delivery, true,
           'schedule', %(now)s, d.target,
           CASE WHEN d.concurrency_key IS NOT NULL THEN 'key:' || d.concurrency_key
                WHEN d.overlap_policy = 'allow' AND d.max_concurrency = 0 THEN NULL
                ELSE 'job:' || d.id::text END,
           CASE WHEN d.misfire_policy IN ('backfill', 'fire_once') THEN NULL
                ELSE d.next_fire_at + make_interval(secs => d.misfire_grace_s) END,
           d.retry_rules, d.partition_key
    FROM due d
    ON CONFLICT DO NOTHING
    RETURNING tenant, task, scheduled_for
),
advanced AS (
    -- through the primary key (as jobs_advance): joined to `due`, the update was planned as a
    -- hash join over a sequential scan of every job
    UPDATE jobs j SET next_fire_at = NULL,
        tzdata_version = coalesce(%(tzdata_version)s::text, j.tzdata_version)
    WHERE j.id = ANY(ARRAY(SELECT d.id FROM due d))
    RETURNING 1
),
counted AS (
    SELECT tenant, task, scheduled_for, count(*) AS runs FROM made GROUP BY 1, 2, 3
)
SELECT (SELECT count(*) FROM advanced) AS jobs, c.tenant, c.task, c.scheduled_for, c.runs,
       (SELECT pg_notify('duetime_runs', '') FROM made LIMIT 1) AS notified
FROM (VALUES (1)) AS one (x) LEFT JOIN counted c ON true

-- name: runs_materialize_plain
-- One statement: lock up to %(limit)s due plain one-shots (SKIP LOCKED, as jobs_due), make
-- their runs and advance them.
WITH due AS (
    SELECT j.* FROM jobs j
    WHERE {{plain_due}}
    ORDER BY j.next_fire_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
{{plain_made}};

-- name: runs_materialize_plain_leased
-- runs_materialize_plain for a node serving leased partitions: only those whose lease it
-- holds at %(now)s, the lease rows locked FOR KEY SHARE until the transaction ends (as
-- jobs_due_leased, the fence: a takeover waits for it).
WITH due AS (
    SELECT j.* FROM jobs j
    WHERE {{plain_due}}
      AND j.partition_key = ANY(ARRAY(
          SELECT l.partition_key FROM partition_leases l
          WHERE l.owner = %(owner)s AND l.expires_at > %(now)s
          ORDER BY l.partition_key
          FOR KEY SHARE
      ))
    ORDER BY j.next_fire_at
    LIMIT %(limit)s
    FOR UPDATE OF j SKIP LOCKED
),
{{plain_made}};
