-- name: runs_running_by_key
SELECT concurrency_key, count(*) AS running FROM runs
WHERE state = 'running' AND concurrency_key IN (SELECT value FROM json_each(:keys))
GROUP BY concurrency_key;

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
    cancel_requested = 0, replace_deadline = NULL,
    started_at = CASE WHEN available_at <= :now THEN :now ELSE NULL END
WHERE state = 'scheduled' AND id IN (SELECT value FROM json_each(:ids))
RETURNING {{claimed_columns}};

-- name: runs_misfire
-- Judged at claim time: never-attempted scheduled runs older than their job's misfire grace
-- (no worker was up). `skip` skips them all; `fire_once` skips all but the latest due one;
-- `backfill` runs them all. Through runs_misfire_due: only runs whose stored deadline
-- (misfire_at) passed; the job's grace and policy as they are now have the last word.
-- Returns the job's name and the id of each run skipped.
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
RETURNING (SELECT jobs.name FROM jobs WHERE jobs.id = runs.job_id) AS name, id;

-- name: runs_misfire_deadlines
-- A job's misfire policy or grace changed: its scheduled runs not fired yet (waiting, or
-- claimed ahead of their instant) take the deadline the job's settings now give (none where
-- no judge could act: `backfill`, a `fire_once` one-shot — store/_values.py misfire_deadline).
UPDATE runs SET misfire_at = (
    SELECT CASE WHEN j.misfire_policy = 'backfill' THEN NULL
                WHEN j.misfire_policy = 'fire_once' AND j.schedule_kind IN ('now', 'at') THEN NULL
                ELSE runs.scheduled_for + CAST(j.misfire_grace_s * 1000000 AS INTEGER) END
    FROM jobs j WHERE j.id = runs.job_id)
WHERE job_id = :job_id AND trigger = 'schedule'
  AND (state = 'scheduled' OR (state = 'running' AND started_at IS NULL));

-- name: run_start_overlap_info
SELECT runs.concurrency_key, runs.trigger, jobs.overlap_policy, jobs.max_concurrency
FROM runs JOIN jobs ON jobs.id = runs.job_id
WHERE runs.id = :id AND runs.token = :token AND runs.state = 'running'
  AND runs.started_at IS NULL AND runs.concurrency_key IS NOT NULL;

-- name: runs_start_keyed_info
-- The runs of a runs_start batch (:runs, a JSON array of [id, token]) that have an overlap key
-- and are still waiting to start, each with its job's policy, in id order; `eligible` when the
-- lease has not lapsed and the job may run (run_start's checks). BEGIN IMMEDIATE holds the
-- database: the batch is judged at once (policies/overlap.py plan_starts).
SELECT r.id, r.token, r.concurrency_key, r.trigger, j.overlap_policy, j.max_concurrency,
       r.lease_expires_at > :now
           AND (j.status IN ('active', 'completed')
                OR (j.status = 'paused' AND r.trigger = 'manual')) AS eligible
FROM runs r JOIN jobs j ON j.id = r.job_id
WHERE (r.id, r.token) IN (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]')
                          FROM json_each(:runs))
  AND r.state = 'running' AND r.started_at IS NULL AND r.concurrency_key IS NOT NULL
ORDER BY r.id;

-- name: runs_started_by_key
-- Each key's started runs (through runs_running_key), counted once for a start batch.
SELECT concurrency_key, count(*) AS running FROM runs
WHERE state = 'running' AND concurrency_key IN (SELECT value FROM json_each(:keys))
  AND started_at IS NOT NULL
GROUP BY concurrency_key;

-- name: runs_start_skip
-- Runs of a start batch that their overlap policy skips (run_start_skip, for many), read and
-- checked by runs_start_keyed_info in this transaction.
UPDATE runs SET
    state = 'skipped', reason = 'overlap', finished_at = :now, token = token + 1,
    attempt = attempt - 1, lease_owner = NULL, lease_expires_at = NULL
WHERE id IN (SELECT value FROM json_each(:ids));

-- name: runs_start_defer
-- Runs of a start batch that wait for their key (run_start_defer, for many): back to the
-- queue; read and checked by runs_start_keyed_info in this transaction.
UPDATE runs SET
    state = 'scheduled', token = token + 1, attempt = attempt - 1, lease_owner = NULL,
    lease_expires_at = NULL, claimed_at = NULL
WHERE id IN (SELECT value FROM json_each(:ids));

-- name: runs_start_judged
-- The keyed runs of a start batch whose policy lets them start (read and checked by
-- runs_start_keyed_info in this transaction): started, lease renewed.
UPDATE runs SET started_at = max(:now, available_at),
    lease_expires_at = coalesce(:now + CAST(round(:lease_ttl * 1000000) AS INTEGER), lease_expires_at)
WHERE id IN (SELECT value FROM json_each(:ids))
RETURNING id;

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

-- name: runs_replace_victims
-- A `replace`'s victims (decision 0016): the running runs of `keys` with their job's
-- replace_timeout_s (BEGIN IMMEDIATE holds the database).
SELECT r.*, j.replace_timeout_s FROM runs r JOIN jobs j ON j.id = r.job_id
WHERE r.state = 'running' AND r.concurrency_key IN (SELECT value FROM json_each(:keys))
ORDER BY r.id;

-- name: run_replace_request
-- Ask a running run to stop for its successor: its worker hears it (store/cancel_news.py, in
-- this process) and its attempt ends; past `deadline` run_replace cancels it outright.
UPDATE runs SET cancel_requested = 1, replace_deadline = :deadline
WHERE id = :id AND token = :token AND state = 'running' AND replace_deadline IS NULL;

-- name: runs_trim_waiting
-- The runs waiting for `keys` (due, scheduled, never attempted, not manual) beyond what their
-- policy keeps (decision 0016): `buffer_one` and `replace` keep the newest of the key, the
-- older ones are skipped `superseded` — a running run of the key that is due (started, or
-- claimed ahead and past its instant) counts as the newest when it is newer, so it is not
-- replaced by an older one; `serialize` / `allow` with max_waiting keep the oldest
-- max_waiting while the key is at its limit, the newer ones are skipped `queue_full`.
WITH waiting AS (
    SELECT r.id, r.concurrency_key, r.scheduled_for, j.overlap_policy, j.max_waiting,
           r.state = 'scheduled' AS waits,
           (SELECT count(*) FROM runs b
            WHERE b.concurrency_key = r.concurrency_key AND b.state = 'running'
              AND b.started_at IS NOT NULL) >= max(j.max_concurrency, 1) AS at_limit
    FROM runs r JOIN jobs j ON j.id = r.job_id
    WHERE r.concurrency_key IN (SELECT value FROM json_each(:keys))
      AND ((r.state = 'scheduled' AND r.available_at <= :now AND r.attempt = 0
            AND r.trigger <> 'manual')
           OR (r.state = 'running' AND j.overlap_policy IN ('buffer_one', 'replace')
               AND (r.started_at IS NOT NULL OR r.available_at <= :now)))
),
ranked AS (
    SELECT id, overlap_policy, max_waiting, at_limit, waits,
           row_number() OVER (
               PARTITION BY concurrency_key, overlap_policy IN ('buffer_one', 'replace')
               ORDER BY scheduled_for DESC, waits, id DESC) AS newer,
           row_number() OVER (
               PARTITION BY concurrency_key, waits ORDER BY scheduled_for, id) AS place
    FROM waiting
),
doomed AS (
    SELECT id, CASE WHEN overlap_policy IN ('buffer_one', 'replace') THEN 'superseded'
                    ELSE 'queue_full' END AS reason
    FROM ranked
    WHERE waits
      AND ((overlap_policy IN ('buffer_one', 'replace') AND newer > 1)
           OR (overlap_policy IN ('serialize', 'allow') AND at_limit AND max_waiting > 0
               AND place > max_waiting))
)
UPDATE runs SET state = 'skipped', finished_at = :now,
    reason = (SELECT doomed.reason FROM doomed WHERE doomed.id = runs.id)
WHERE id IN (SELECT id FROM doomed) AND state = 'scheduled'
RETURNING id;
