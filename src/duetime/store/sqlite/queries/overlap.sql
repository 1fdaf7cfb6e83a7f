-- name: runs_running_by_key
SELECT concurrency_key, count(*) AS running FROM runs
WHERE state = 'running' AND concurrency_key IN (SELECT value FROM json_each(:keys))
GROUP BY concurrency_key;

-- name: runs_running_of_keys
SELECT * FROM runs
WHERE state = 'running' AND concurrency_key IN (SELECT value FROM json_each(:keys));

-- name: run_replace
UPDATE runs SET
    state = 'cancelled', reason = 'replaced', token = token + 1, finished_at = :now,
    lease_owner = NULL, lease_expires_at = NULL, cancel_requested = 1
WHERE id = :id AND token = :token AND state = 'running';

-- name: runs_skip_overlap
UPDATE runs SET state = 'skipped', reason = 'overlap', finished_at = :now
WHERE state = 'scheduled' AND id IN (SELECT value FROM json_each(:ids));

-- name: runs_claim_ids
UPDATE runs SET
    state = 'running', token = token + 1, attempt = attempt + 1, lease_owner = :worker_id,
    lease_expires_at = :now + CAST(round(:lease_ttl * 1000000) AS INTEGER), claimed_at = :now, finished_at = NULL,
    started_at = CASE WHEN available_at <= :now THEN :now ELSE NULL END
WHERE state = 'scheduled' AND id IN (SELECT value FROM json_each(:ids))
RETURNING *;

-- name: runs_misfire
-- Judged at claim time: never-attempted scheduled runs older than their job's misfire grace
-- (no worker was up). `skip` skips them all; `fire_once` skips all but the latest due one;
-- `backfill` runs them all. Through runs_misfire_due: only runs whose stored deadline
-- (misfire_at) passed; the job's grace and policy as they are now have the last word.
-- Returns the job's name of each run skipped.
UPDATE runs SET
    state = 'skipped', finished_at = :now,
    reason = 'misfire_' || (SELECT jobs.misfire_policy FROM jobs WHERE jobs.id = runs.job_id)
WHERE id IN (
    SELECT r.id FROM runs r JOIN jobs j ON j.id = r.job_id
    WHERE r.state = 'scheduled' AND r.attempt = 0 AND r.misfire_at IS NOT NULL
      AND r.misfire_at < :now
      AND r.scheduled_for < :now - CAST(j.misfire_grace_s * 1000000 AS INTEGER)
      AND (j.misfire_policy = 'skip'
           OR (j.misfire_policy = 'fire_once' AND EXISTS (
               SELECT 1 FROM runs n
               WHERE n.job_id = r.job_id AND n.trigger = 'schedule'
                 AND n.scheduled_for > r.scheduled_for AND n.scheduled_for <= :now)))
    LIMIT :limit
)
RETURNING (SELECT jobs.name FROM jobs WHERE jobs.id = runs.job_id) AS name;

-- name: runs_misfire_deadlines
-- A job's misfire policy or grace changed: its scheduled runs not fired yet (waiting, or
-- claimed ahead of their instant) take the deadline the job's settings now give.
UPDATE runs SET misfire_at = (
    SELECT CASE WHEN j.misfire_policy = 'backfill' THEN NULL
                ELSE runs.scheduled_for + CAST(j.misfire_grace_s * 1000000 AS INTEGER) END
    FROM jobs j WHERE j.id = runs.job_id)
WHERE job_id = :job_id AND trigger = 'schedule'
  AND (state = 'scheduled' OR (state = 'running' AND started_at IS NULL));

-- name: run_start_overlap_info
SELECT runs.concurrency_key, runs.trigger, jobs.overlap_policy, jobs.max_concurrency
FROM runs JOIN jobs ON jobs.id = runs.job_id
WHERE runs.id = :id AND runs.token = :token AND runs.state = 'running'
  AND runs.started_at IS NULL AND runs.concurrency_key IS NOT NULL;

-- name: runs_start_keyed
-- The runs of a runs_start batch (:runs, a JSON array of [id, token]) that have an overlap key
-- and are still waiting to start: they take run_start's path one by one.
SELECT id FROM runs
WHERE (id, token) IN (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]')
                      FROM json_each(:runs))
  AND state = 'running' AND started_at IS NULL AND concurrency_key IS NOT NULL;

-- name: runs_started_of_key
SELECT count(*) AS running FROM runs
WHERE concurrency_key = :key AND state = 'running' AND started_at IS NOT NULL AND id <> :id;

-- name: run_start_skip
-- A run claimed ahead whose key is busy at its instant, under overlap `skip`.
UPDATE runs SET
    state = 'skipped', reason = 'overlap', finished_at = :now, token = token + 1,
    attempt = attempt - 1, lease_owner = NULL, lease_expires_at = NULL
WHERE id = :id AND token = :token AND state = 'running';

-- name: run_start_defer
-- A run claimed ahead whose key is busy at its instant: back in the queue, attempt refunded.
UPDATE runs SET
    state = 'scheduled', token = token + 1, attempt = attempt - 1, lease_owner = NULL,
    lease_expires_at = NULL, claimed_at = NULL
WHERE id = :id AND token = :token AND state = 'running';
