-- name: overlap_keys_lock
-- Serializes claims per key until commit; a fresh statement afterwards sees every claim that
-- committed before us.
SELECT count(pg_advisory_xact_lock(h)) AS locked
FROM (SELECT hashtextextended(k, 7) AS h FROM unnest(%(keys)s::text[]) AS k ORDER BY 1) AS s;

-- name: runs_running_by_key
SELECT concurrency_key, count(*) AS running FROM runs
WHERE state = 'running' AND concurrency_key = ANY(%(keys)s::text[])
GROUP BY concurrency_key;

-- name: run_replace
UPDATE runs SET
    state = 'cancelled', reason = 'replaced', token = token + 1, finished_at = %(now)s,
    lease_owner = NULL, lease_expires_at = NULL, cancel_requested = true
WHERE id = %(id)s AND token = %(token)s AND state = 'running';

-- name: runs_skip_overlap
UPDATE runs SET state = 'skipped', reason = 'overlap', finished_at = %(now)s
WHERE state = 'scheduled' AND id = ANY(%(ids)s::uuid[]);

-- name: runs_claim_ids
UPDATE runs r SET
    state = 'running', token = r.token + 1, attempt = r.attempt + 1, lease_owner = %(worker_id)s,
    lease_expires_at = %(now)s + make_interval(secs => %(lease_ttl)s), claimed_at = %(now)s,
    finished_at = NULL, cancel_requested = false, replace_deadline = NULL,
    started_at = CASE WHEN r.available_at <= %(now)s THEN %(now)s ELSE NULL END
WHERE r.state = 'scheduled' AND r.id = ANY(%(ids)s::uuid[])
RETURNING {{claimed_columns}};

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
RETURNING missed.name, missed.id;

-- name: runs_misfire_deadlines
-- A job's misfire policy or grace changed: its scheduled runs not fired yet (waiting, or
-- claimed ahead of their instant) take the deadline the job's settings now give (none where
-- no judge could act: `backfill`, a `fire_once` one-shot — store/_values.py misfire_deadline).
UPDATE runs r SET misfire_at = CASE WHEN j.misfire_policy = 'backfill' THEN NULL
                               WHEN j.misfire_policy = 'fire_once'
                                    AND j.schedule_kind IN ('now', 'at') THEN NULL
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

-- name: runs_replace_victims
-- A `replace`'s victims (decision 0016): the running runs of `keys`, locked (in id order),
-- with their job's replace_timeout_s.
SELECT r.*, j.replace_timeout_s FROM runs r JOIN jobs j ON j.id = r.job_id
WHERE r.state = 'running' AND r.concurrency_key = ANY(%(keys)s::text[])
ORDER BY r.id
FOR UPDATE OF r;

-- name: run_replace_request
-- Ask a running run to stop for its successor: its worker hears it (runs_cancels_notify) and
-- its attempt ends; past `deadline` run_replace cancels it outright.
UPDATE runs SET cancel_requested = true, replace_deadline = %(deadline)s
WHERE id = %(id)s AND token = %(token)s AND state = 'running' AND replace_deadline IS NULL;

-- name: runs_cancels_notify
-- Delivered at commit to every process listening on duetime_cancels (store/cancel_news.py).
SELECT count(pg_notify('duetime_cancels', i::text)) AS sent FROM unnest(%(ids)s::uuid[]) AS i;

-- name: runs_trim_waiting
-- The runs waiting for `keys` (due, scheduled, never attempted, not manual) beyond what their
-- policy keeps (decision 0016): `buffer_one` and `replace` keep the newest of the key, the
-- older ones are skipped `superseded` — a running run of the key that is due (started, or
-- claimed ahead and past its instant) counts as the newest when it is newer, so it is not
-- replaced by an older one; `serialize` / `allow` with max_waiting keep the oldest
-- max_waiting while the key is at its limit, the newer ones are skipped `queue_full`. Under
-- the keys' locks. A doomed run another transaction holds (a concurrent claim's candidate,
-- waiting for these keys' locks) is left alone: that claim trims it once the keys are its
-- own; waiting for it here would deadlock.
WITH t AS (SELECT %(now)s::timestamptz AS now),
waiting AS (
    SELECT r.id, r.concurrency_key, r.scheduled_for, j.overlap_policy, j.max_waiting,
           r.state = 'scheduled' AS waits,
           (SELECT count(*) FROM runs b
            WHERE b.concurrency_key = r.concurrency_key AND b.state = 'running'
              AND b.started_at IS NOT NULL) >= greatest(j.max_concurrency, 1) AS at_limit
    FROM runs r JOIN jobs j ON j.id = r.job_id, t
    WHERE r.concurrency_key = ANY(%(keys)s::text[])
      AND ((r.state = 'scheduled' AND r.available_at <= t.now AND r.attempt = 0
            AND r.trigger <> 'manual')
           OR (r.state = 'running' AND j.overlap_policy IN ('buffer_one', 'replace')
               AND (r.started_at IS NOT NULL OR r.available_at <= t.now)))
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
),
free AS (
    SELECT r.id FROM runs r
    WHERE r.id = ANY(ARRAY(SELECT id FROM doomed)) AND r.state = 'scheduled'
    FOR UPDATE SKIP LOCKED
)
UPDATE runs SET state = 'skipped', reason = doomed.reason, finished_at = t.now
FROM doomed JOIN free ON free.id = doomed.id, t
WHERE runs.id = doomed.id AND runs.state = 'scheduled'
RETURNING runs.id;
