-- name: overlap_keys_lock
-- Serializes claims per key until commit; a fresh statement afterwards sees every claim that
-- committed before us.
SELECT count(pg_advisory_xact_lock(h)) AS locked
FROM (SELECT hashtextextended(k, 7) AS h FROM unnest(%(keys)s::text[]) AS k ORDER BY 1) AS s;

-- name: runs_running_by_key
SELECT concurrency_key, count(*) AS running FROM runs
WHERE state = 'running' AND concurrency_key = ANY(%(keys)s::text[])
GROUP BY concurrency_key;

-- name: runs_running_of_keys
SELECT * FROM runs
WHERE state = 'running' AND concurrency_key = ANY(%(keys)s::text[])
FOR UPDATE;

-- name: run_replace
UPDATE runs SET
    state = 'cancelled', reason = 'replaced', token = token + 1, finished_at = %(now)s,
    lease_owner = NULL, lease_expires_at = NULL, cancel_requested = true
WHERE id = %(id)s AND token = %(token)s AND state = 'running';

-- name: runs_skip_overlap
UPDATE runs SET state = 'skipped', reason = 'overlap', finished_at = %(now)s
WHERE state = 'scheduled' AND id = ANY(%(ids)s::uuid[]);

-- name: runs_claim_ids
UPDATE runs SET
    state = 'running', token = token + 1, attempt = attempt + 1, lease_owner = %(worker_id)s,
    lease_expires_at = %(now)s + make_interval(secs => %(lease_ttl)s), claimed_at = %(now)s,
    finished_at = NULL,
    started_at = CASE WHEN available_at <= %(now)s THEN %(now)s ELSE NULL END
WHERE state = 'scheduled' AND id = ANY(%(ids)s::uuid[])
RETURNING *;

-- name: runs_misfire
-- Through runs_misfire_due: only runs whose stored deadline (misfire_at) passed, never every
-- due run; the job's grace and policy as they are now have the last word.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now),
missed AS (
    SELECT r.id, j.misfire_policy, j.name FROM runs r JOIN jobs j ON j.id = r.job_id, t
    WHERE r.state = 'scheduled' AND r.attempt = 0 AND r.misfire_at IS NOT NULL
      AND r.misfire_at < t.now
      AND r.scheduled_for < t.now - make_interval(secs => j.misfire_grace_s)
      AND (j.misfire_policy = 'skip'
           OR (j.misfire_policy = 'fire_once' AND EXISTS (
               SELECT 1 FROM runs n
               WHERE n.job_id = r.job_id AND n.trigger = 'schedule'
                 AND n.scheduled_for > r.scheduled_for AND n.scheduled_for <= t.now)))
    LIMIT %(limit)s
    FOR UPDATE OF r SKIP LOCKED
)
UPDATE runs SET state = 'skipped', finished_at = t.now, reason = 'misfire_' || missed.misfire_policy
FROM missed, t
WHERE runs.id = missed.id
RETURNING missed.name;

-- name: runs_misfire_deadlines
-- A job's misfire policy or grace changed: its scheduled runs not fired yet (waiting, or
-- claimed ahead of their instant) take the deadline the job's settings now give.
UPDATE runs r SET misfire_at = CASE WHEN j.misfire_policy = 'backfill' THEN NULL
                               ELSE r.scheduled_for + make_interval(secs => j.misfire_grace_s)
                               END
FROM jobs j
WHERE j.id = %(job_id)s AND r.job_id = j.id AND r.trigger = 'schedule'
  AND (r.state = 'scheduled' OR (r.state = 'running' AND r.started_at IS NULL));

-- name: run_start_overlap_info
SELECT runs.concurrency_key, runs.trigger, jobs.overlap_policy, jobs.max_concurrency
FROM runs JOIN jobs ON jobs.id = runs.job_id
WHERE runs.id = %(id)s AND runs.token = %(token)s AND runs.state = 'running'
  AND runs.started_at IS NULL AND runs.concurrency_key IS NOT NULL;

-- name: runs_started_of_key
SELECT count(*) AS running FROM runs
WHERE concurrency_key = %(key)s AND state = 'running' AND started_at IS NOT NULL
  AND id <> %(id)s;

-- name: run_start_skip
UPDATE runs SET
    state = 'skipped', reason = 'overlap', finished_at = %(now)s, token = token + 1,
    attempt = attempt - 1, lease_owner = NULL, lease_expires_at = NULL
WHERE id = %(id)s AND token = %(token)s AND state = 'running';

-- name: run_start_defer
UPDATE runs SET
    state = 'scheduled', token = token + 1, attempt = attempt - 1, lease_owner = NULL,
    lease_expires_at = NULL, claimed_at = NULL
WHERE id = %(id)s AND token = %(token)s AND state = 'running';

-- name: runs_start_keyed_info
-- The runs of a start batch that have an overlap key, under the caller's key locks: each row
-- locked (its primary key, in id order) and read with its job's policy; `eligible` when the
-- lease has not lapsed and the job may run (the checks of run_start).
WITH t AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now)
SELECT k.id, k.token, k.concurrency_key, k.trigger, j.overlap_policy, j.max_concurrency,
       k.lease_expires_at > t.now
           AND (j.status IN ('active', 'completed')
                OR (j.status = 'paused' AND k.trigger = 'manual')) AS eligible
FROM t, unnest(%(ids)s::uuid[], %(tokens)s::bigint[]) AS i(id, token)
CROSS JOIN LATERAL (
    SELECT runs.* FROM runs WHERE runs.id = i.id LIMIT 1 FOR UPDATE
) k
CROSS JOIN LATERAL (
    SELECT jobs.status, jobs.overlap_policy, jobs.max_concurrency FROM jobs
    WHERE jobs.id = k.job_id LIMIT 1
) j
WHERE k.token = i.token AND k.state = 'running' AND k.started_at IS NULL
  AND k.concurrency_key IS NOT NULL
ORDER BY k.id;

-- name: runs_started_by_key
-- Each key's started runs (through runs_running_key); read under the keys' locks.
SELECT concurrency_key, count(*) AS running FROM runs
WHERE state = 'running' AND concurrency_key = ANY(%(keys)s::text[]) AND started_at IS NOT NULL
GROUP BY concurrency_key;

-- name: runs_start_skip
-- Runs of a start batch that their overlap policy skips (run_start_skip, for many); the rows
-- are locked and checked (token included) by runs_start_keyed_info in this transaction.
UPDATE runs r SET
    state = 'skipped', reason = 'overlap',
    finished_at = coalesce(%(now)s::timestamptz, clock_timestamp()), token = r.token + 1,
    attempt = r.attempt - 1, lease_owner = NULL, lease_expires_at = NULL
WHERE r.id = ANY(%(ids)s::uuid[]);

-- name: runs_start_defer
-- Runs of a start batch that wait for their key (run_start_defer, for many): back to the
-- queue; locked and checked by runs_start_keyed_info in this transaction.
UPDATE runs r SET
    state = 'scheduled', token = r.token + 1, attempt = r.attempt - 1, lease_owner = NULL,
    lease_expires_at = NULL, claimed_at = NULL
WHERE r.id = ANY(%(ids)s::uuid[]);

-- name: runs_start_judged
-- The keyed runs of a start batch whose policy lets them start (locked and checked by
-- runs_start_keyed_info in this transaction): started, lease renewed.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now)
UPDATE runs r SET started_at = greatest(t.now, r.available_at),
    lease_expires_at = CASE WHEN %(lease_ttl)s::float8 IS NULL THEN r.lease_expires_at
                            ELSE t.now + make_interval(secs => %(lease_ttl)s::float8) END
FROM t
WHERE r.id = ANY(%(ids)s::uuid[])
RETURNING r.id;
