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
WITH t AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now),
missed AS (
    SELECT r.id, j.misfire_policy FROM runs r JOIN jobs j ON j.id = r.job_id, t
    WHERE r.state = 'scheduled' AND r.attempt = 0 AND r.trigger = 'schedule'
      AND r.scheduled_for < t.now
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
RETURNING runs.id;

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
