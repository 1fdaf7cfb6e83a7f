-- The checks of a start, run_start's and runs_start's alike (after the token fence): the lease
-- has not lapsed, and the run's job lets it start (active or completed; paused only for a
-- manual run); included as {{start_allowed}}.
-- fragment: start_allowed
lease_expires_at > :now
  AND EXISTS (
      SELECT 1 FROM jobs
      WHERE jobs.id = runs.job_id
        AND (jobs.status IN ('active', 'completed')
             OR (jobs.status = 'paused' AND runs.trigger = 'manual'))
  )

-- name: runs_insert
-- Many runs at once (`batch`: a JSON array of records, as on PostgreSQL); an existing
-- occurrence (or idempotency key) is left alone. Returns the ids inserted, each with its
-- job's.
INSERT INTO runs (
    id, job_id, tenant, job_name, task, queue, payload, scheduled_for, available_at, state,
    priority, max_attempts, backoff_base, backoff_factor, backoff_cap, timeout_s, delivery,
    one_shot, trigger, idempotency_key, request_hash, created_at, target, concurrency_key,
    misfire_at, retry_rules, origin
)
SELECT json_extract(r.value, '$.id'), json_extract(r.value, '$.job_id'),
       json_extract(r.value, '$.tenant'), json_extract(r.value, '$.job_name'),
       json_extract(r.value, '$.task'), json_extract(r.value, '$.queue'),
       json_extract(r.value, '$.payload'), json_extract(r.value, '$.scheduled_for'),
       json_extract(r.value, '$.available_at'), 'scheduled',
       json_extract(r.value, '$.priority'), json_extract(r.value, '$.max_attempts'),
       json_extract(r.value, '$.backoff_base'), json_extract(r.value, '$.backoff_factor'),
       json_extract(r.value, '$.backoff_cap'), json_extract(r.value, '$.timeout_s'),
       json_extract(r.value, '$.delivery'), json_extract(r.value, '$.one_shot'),
       json_extract(r.value, '$.trigger'), json_extract(r.value, '$.idempotency_key'),
       json_extract(r.value, '$.request_hash'), :now, json_extract(r.value, '$.target'),
       json_extract(r.value, '$.concurrency_key'), json_extract(r.value, '$.misfire_at'),
       json_extract(r.value, '$.retry_rules'), json_extract(r.value, '$.origin')
FROM json_each(:batch) AS r
WHERE true  -- an INSERT … SELECT needs a WHERE before ON CONFLICT
ON CONFLICT DO NOTHING
RETURNING id, job_id;

-- name: runs_insert_values
-- runs_insert with each run's values bound as parameters: {columns} are the store's
-- RUN_COLUMNS (the columns of runs_insert but state and created_at, a test holds them
-- together), {values} one (?, …) per run; the first parameter is now. The materializer's
-- path: runs_insert's json_extract per field took 3.5 times as long (44 ms for 500 runs).
INSERT INTO runs (state, created_at, {columns})
SELECT 'scheduled', ?, * FROM (VALUES {values})
WHERE true  -- an INSERT … SELECT needs a WHERE before ON CONFLICT
ON CONFLICT DO NOTHING
RETURNING id, job_id;

-- fragment: trigger_from_job
-- The one-statement manual run (run_trigger_by_id / _by_name; see the PostgreSQL
-- dialect): nothing comes back when the job is missing or cancelled or the idempotency key
-- already has a run. The concurrency key is store/_values.py's overlap_key.
INSERT INTO runs (
    id, job_id, tenant, job_name, task, queue, payload, scheduled_for, available_at, state,
    priority, max_attempts, backoff_base, backoff_factor, backoff_cap, timeout_s, delivery,
    one_shot, trigger, idempotency_key, request_hash, created_at, target, concurrency_key,
    retry_rules
)
SELECT :id, j.id, j.tenant, j.name, j.task, j.queue, coalesce(:payload, j.payload), :now,
       :now, 'scheduled', coalesce(:priority, j.priority), j.max_attempts, j.backoff_base,
       j.backoff_factor, j.backoff_cap, j.timeout_s, j.delivery, 0, 'manual',
       :idempotency_key, :request_hash, :now, j.target,
       CASE WHEN j.concurrency_key IS NOT NULL THEN 'key:' || j.concurrency_key
            WHEN j.overlap_policy = 'allow' AND j.max_concurrency = 0 THEN NULL
            ELSE 'job:' || j.id END,
       j.retry_rules
FROM jobs j

-- name: run_trigger_by_id
{{trigger_from_job}}
WHERE j.tenant = :tenant AND j.id = :job_id AND j.status <> 'cancelled'
ON CONFLICT DO NOTHING
RETURNING *;

-- name: run_trigger_by_name
{{trigger_from_job}}
WHERE j.tenant = :tenant AND j.name = :job_name AND j.status <> 'cancelled'
ON CONFLICT DO NOTHING
RETURNING *;

-- name: run_get
SELECT * FROM runs WHERE tenant = :tenant AND id = :id;

-- name: run_lock
-- No row locks in SQLite: the caller's BEGIN IMMEDIATE already holds the database.
SELECT * FROM runs WHERE tenant = :tenant AND id = :id;

-- name: run_get_by_key
SELECT * FROM runs WHERE job_id = :job_id AND idempotency_key = :idempotency_key;

-- name: runs_list
SELECT * FROM runs
WHERE tenant = :tenant
  AND (:job_id IS NULL OR job_id = :job_id)
  AND (:state IS NULL OR state = :state)
  AND (:task IS NULL OR task = :task)
  AND (:since IS NULL OR scheduled_for >= :since)
  AND (:until IS NULL OR scheduled_for < :until)
  AND (:before_at IS NULL OR (scheduled_for, id) < (:before_at, :before_id))
ORDER BY scheduled_for DESC, id DESC
LIMIT :limit;

-- name: runs_withdraw_pending
-- A job's scheduled runs withdrawn before their instant (paused, schedule changed), deleted
-- before runs_end_pending ends the rest: never due and never started (a first attempt at most
-- claimed ahead, no attempt recorded), they are no history, and the occurrence is free for the
-- new schedule to write again (runs are unique per job and instant; decision 0019).
DELETE FROM runs
WHERE job_id = :job_id AND trigger = 'schedule' AND scheduled_for > :now
  AND ((state = 'scheduled' AND attempt = 0)
       OR (state = 'running' AND started_at IS NULL AND attempt = 1))
  AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.run_id = runs.id);

-- name: runs_end_pending
-- Not-yet-started runs of a job (scheduled, or claimed ahead but not started) → skipped or
-- cancelled; the token bump fences any worker holding one of them. Manual runs are ended too
-- when the job is cancelled (a paused job's manual triggers still run).
UPDATE runs SET state = :state, reason = :reason, finished_at = :now, token = token + 1,
    lease_owner = NULL, lease_expires_at = NULL
WHERE job_id = :job_id AND (trigger = 'schedule' OR :include_manual)
  AND (state = 'scheduled' OR (state = 'running' AND started_at IS NULL))
RETURNING id;

-- name: run_start
-- started_at is the later of now and the run's instant: a worker writes a start shortly
-- before the instant (worker/starter.py) and calls the task at the instant.
-- Fenced by token, refused on a lapsed lease (the reaper may be about to take the run over),
-- and renewing the lease so a run that starts has a full lease ahead of it.
UPDATE runs SET started_at = max(:now, available_at),
    lease_expires_at = coalesce(:now + CAST(round(:lease_ttl * 1000000) AS INTEGER), lease_expires_at)
WHERE id = :id AND token = :token AND state = 'running' AND started_at IS NULL
  AND {{start_allowed}};

-- name: runs_start
-- run_start for a batch of runs claimed ahead (:runs, a JSON array of [id, token]) in one
-- statement: the same fencing, lease and job checks, for the runs WITHOUT an overlap key (those
-- with one are read by runs_start_keyed_info and judged as a batch, in the same transaction).
-- Locks: nothing beyond the database, held by the caller's BEGIN IMMEDIATE.
UPDATE runs SET started_at = max(:now, available_at),
    lease_expires_at = coalesce(:now + CAST(round(:lease_ttl * 1000000) AS INTEGER), lease_expires_at)
WHERE (id, token) IN (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]')
                      FROM json_each(:runs))  -- each run found by primary key
  AND state = 'running' AND started_at IS NULL AND concurrency_key IS NULL
  AND {{start_allowed}}
RETURNING id;

-- name: runs_heartbeat
-- The runs (id, token) this worker still holds, their leases extended; each row found by
-- primary key. A remote worker's lease is (tenant, lease owner): :tenant, when set, must be
-- the run's. Each id's token is read by its position (a join of the two arrays walked one
-- for each element of the other: 40 ms for 500 runs).
UPDATE runs SET lease_expires_at = :now + CAST(round(:lease_ttl * 1000000) AS INTEGER)
WHERE (id, token) IN (SELECT i.value, json_extract(:tokens, '$[' || i.key || ']')
                      FROM json_each(:ids) AS i)
  AND state = 'running' AND lease_owner = :worker_id
  AND (:tenant IS NULL OR tenant = :tenant)
RETURNING id;

-- name: attempt_record
INSERT INTO attempts (
    run_id, token, job_id, tenant, number, worker_id, claimed_at, started_at, finished_at,
    outcome, error_class, error_message
)
SELECT :run_id, :token, job_id, tenant, :number, :worker_id, :claimed_at, :started_at, :now,
       :outcome, :error_class, :error_message
FROM runs WHERE id = :run_id
ON CONFLICT (run_id, token) DO UPDATE SET
    outcome = excluded.outcome, finished_at = excluded.finished_at,
    started_at = coalesce(attempts.started_at, excluded.started_at),
    error_class = excluded.error_class, error_message = excluded.error_message
-- only a takeover's record (lost, cancelled) turns stale; an applied outcome stays
WHERE attempts.outcome IN ('lost', 'cancelled');

-- name: leases_expired
-- A run a newer one replaces (decision 0016) stays until its replace_deadline has passed:
-- its handler may still run (a worker shutting down lets the lease run out), so its
-- successor waits for it until then.
SELECT * FROM runs
WHERE state = 'running' AND lease_expires_at < :now
  AND (replace_deadline IS NULL OR replace_deadline < :now)
ORDER BY lease_expires_at
LIMIT :limit;

-- name: runs_reap
-- One array per column (JSON): element k of each is run k.
UPDATE runs SET
    state = i.next_state, token = runs.token + 1, lease_owner = NULL, lease_expires_at = NULL,
    available_at = :now, reason = i.reason,
    -- claimed ahead and never started: its attempt is given back (nothing of it ran)
    attempt = runs.attempt - CASE WHEN i.next_state = 'scheduled' AND runs.started_at IS NULL
                                  THEN 1 ELSE 0 END,
    finished_at = CASE WHEN i.next_state = 'scheduled' THEN NULL ELSE :now END,
    cancel_requested = runs.cancel_requested AND i.next_state <> 'scheduled',
    replace_deadline = CASE WHEN i.next_state = 'scheduled' THEN NULL
                            ELSE runs.replace_deadline END
FROM (SELECT k.value AS id, json_extract(:token, '$[' || k.key || ']') AS token,
             json_extract(:next_state, '$[' || k.key || ']') AS next_state,
             json_extract(:reason, '$[' || k.key || ']') AS reason
      FROM json_each(:id) AS k) AS i
WHERE runs.id = i.id AND runs.token = i.token AND runs.state = 'running'
RETURNING runs.id;

-- name: runs_replay
UPDATE runs SET
    state = 'scheduled', available_at = :now, finished_at = NULL, reason = NULL,
    replays = replays + 1, retry_from = :now,  -- a fresh retry window (retry.within)
    max_attempts = attempt + coalesce(:max_attempts,
        (SELECT jobs.max_attempts FROM jobs WHERE jobs.id = runs.job_id))
WHERE id IN (
    SELECT id FROM runs
    WHERE tenant = :tenant AND state = 'dead'
      AND (:job_id IS NULL OR job_id = :job_id)
      AND (:run_ids IS NULL OR id IN (SELECT value FROM json_each(:run_ids)))
      -- a workflow step's run is retried through its instance (app.workflows.retry)
      AND NOT EXISTS (SELECT 1 FROM workflow_steps s WHERE s.run_id = runs.id)
    ORDER BY finished_at
    LIMIT :limit
)
RETURNING id;

-- name: run_cancel
UPDATE runs SET
    state = 'cancelled', token = token + 1, reason = 'cancelled', finished_at = :now,
    lease_owner = NULL, lease_expires_at = NULL,
    cancel_requested = (state = 'running')  -- its worker sees it: ctx.cancelled
WHERE tenant = :tenant AND id = :id AND state IN ('scheduled', 'running')
RETURNING *;

-- name: attempts_list
SELECT * FROM attempts WHERE tenant = :tenant AND run_id = :run_id ORDER BY number, token;

-- name: skips_insert
-- One array per column (JSON), as PostgreSQL's unnest: element k of each is row k.
INSERT INTO run_skips (job_id, first_at, last_at, count, reason, created_at)
SELECT j.value, json_extract(:first_at, '$[' || j.key || ']'),
       json_extract(:last_at, '$[' || j.key || ']'), json_extract(:count, '$[' || j.key || ']'),
       json_extract(:reason, '$[' || j.key || ']'), :now
FROM json_each(:job_id) AS j;

-- name: skips_list
SELECT s.* FROM run_skips s JOIN jobs j ON j.id = s.job_id
WHERE j.tenant = :tenant AND s.job_id = :job_id
ORDER BY s.first_at;

-- name: runs_complete
-- The fenced end of a batch of attempts (`batch`: a JSON array of [run id, token, next state,
-- available_at, reason, error class, error message, refund (0/1), result (JSON text)], each
-- (run, token) once), one statement: runs still `running` with the attempt's token take the outcome. Returns the
-- applied (id, token) with the job. One statement per batch: a statement per run cost two
-- thread hops of aiosqlite each, far more than SQLite's own work. With :tenant (a remote
-- worker), only that tenant's runs.
UPDATE runs SET
    state = CASE WHEN o.id IS NULL THEN json_extract(b.value, '$[2]') ELSE 'cancelled' END,
    attempt = attempt - json_extract(b.value, '$[7]'),
    available_at = coalesce(json_extract(b.value, '$[3]'), available_at),
    finished_at = CASE WHEN json_extract(b.value, '$[2]') = 'scheduled' AND o.id IS NULL
                       THEN NULL ELSE :now END,
    lease_owner = NULL, lease_expires_at = NULL,
    -- a run going back to `scheduled` is asked nothing any more (decision 0016)
    cancel_requested = cancel_requested AND json_extract(b.value, '$[2]') <> 'scheduled',
    replace_deadline = CASE WHEN json_extract(b.value, '$[2]') = 'scheduled' THEN NULL
                            ELSE replace_deadline END,
    reason = CASE WHEN o.id IS NULL THEN json_extract(b.value, '$[4]') ELSE 'cancelled' END,
    last_error_class = json_extract(b.value, '$[5]'),
    last_error_message = json_extract(b.value, '$[6]'),
    result = json_extract(b.value, '$[8]')
FROM json_each(:batch) AS b
-- a run going back to `scheduled` (a retry, a hand-back) whose job was cancelled meanwhile
-- ends `cancelled`: nothing would ever claim it
LEFT JOIN (
    SELECT r.id FROM runs r JOIN jobs j ON j.id = r.job_id
    WHERE j.status = 'cancelled' AND r.state = 'running'
      AND r.id IN (SELECT json_extract(value, '$[0]') FROM json_each(:batch)
                   WHERE json_extract(value, '$[2]') = 'scheduled')
) AS o ON o.id = json_extract(b.value, '$[0]')
WHERE runs.id = json_extract(b.value, '$[0]') AND runs.token = json_extract(b.value, '$[1]')
  AND runs.state = 'running' AND (:tenant IS NULL OR runs.tenant = :tenant)
RETURNING runs.id, runs.token, runs.job_id, runs.state;

-- name: attempts_record
-- Every attempt of a completed batch recorded (`records`: a JSON array of [run id, token,
-- number, worker id, claimed_at, started_at, outcome, error class, error message, traceback];
-- the outcome is `stale` where runs_complete refused it), in the same transaction; with
-- :tenant, none for another tenant's run.
INSERT INTO attempts (
    run_id, token, job_id, tenant, number, worker_id, claimed_at, started_at, finished_at,
    outcome, error_class, error_message, traceback
)
SELECT runs.id, json_extract(a.value, '$[1]'), runs.job_id, runs.tenant,
       json_extract(a.value, '$[2]'), json_extract(a.value, '$[3]'),
       json_extract(a.value, '$[4]'), json_extract(a.value, '$[5]'), :now,
       json_extract(a.value, '$[6]'), json_extract(a.value, '$[7]'),
       json_extract(a.value, '$[8]'), json_extract(a.value, '$[9]')
FROM json_each(:records) AS a JOIN runs ON runs.id = json_extract(a.value, '$[0]')
WHERE :tenant IS NULL OR runs.tenant = :tenant
ON CONFLICT (run_id, token) DO UPDATE SET
    outcome = excluded.outcome, finished_at = excluded.finished_at,
    started_at = coalesce(attempts.started_at, excluded.started_at),
    error_class = excluded.error_class, error_message = excluded.error_message,
    traceback = excluded.traceback
-- only a takeover's record (lost, cancelled) turns stale; an applied outcome stays
WHERE attempts.outcome IN ('lost', 'cancelled');

-- name: runs_by_id_prefix
-- The runs whose id begins with a prefix: ids are lowercase text with dashes at fixed places,
-- so the text range [low, high] (abcd1234-0000-… to abcd1234-ffff-…) is exactly those ids, a
-- range scan of the primary key.
SELECT * FROM runs
WHERE id BETWEEN :low AND :high AND tenant = :tenant
ORDER BY id
LIMIT :limit;

-- name: runs_withdraw_outside
-- runs_withdraw_pending for the runs outside a job's new bounds (see runs_end_outside).
DELETE FROM runs
WHERE job_id = :job_id AND trigger = 'schedule' AND scheduled_for > :now
  AND ((state = 'scheduled' AND attempt = 0)
       OR (state = 'running' AND started_at IS NULL AND attempt = 1))
  AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.run_id = runs.id)
  AND (scheduled_for < :start_at OR scheduled_for > :end_at);

-- name: runs_end_outside
-- A job's not-yet-started scheduled runs outside its new bounds (before :start_at, after
-- :end_at; NULL: unbounded) → skipped, token bumped (fences a worker holding one).
UPDATE runs SET state = 'skipped', reason = 'out_of_bounds', finished_at = :now,
    token = token + 1, lease_owner = NULL, lease_expires_at = NULL
WHERE job_id = :job_id AND trigger = 'schedule'
  AND (state = 'scheduled' OR (state = 'running' AND started_at IS NULL))
  AND (scheduled_for < :start_at OR scheduled_for > :end_at)
RETURNING id;
