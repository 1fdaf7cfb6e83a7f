-- name: db_now
SELECT clock_timestamp() AS now;

-- name: runs_insert
-- Many runs at once (`batch`: a JSON array of records, one orjson call on the client instead
-- of an array per column); an existing occurrence (or idempotency key) is left alone. Returns
-- the ids inserted, each with its job's. (workflows.sql's workflow_items_insert repeats the
-- column list: keep the two alike.)
INSERT INTO runs (
    id, job_id, tenant, job_name, task, queue, payload, scheduled_for, available_at, state,
    priority, max_attempts, backoff_base, backoff_factor, backoff_cap, timeout_s, delivery,
    one_shot, trigger, idempotency_key, request_hash, created_at, target, concurrency_key,
    misfire_at, retry_rules, origin, partition_key
)
SELECT i.id, i.job_id, i.tenant, i.job_name, i.task, i.queue, i.payload::json, i.scheduled_for,
       i.available_at, 'scheduled', i.priority, i.max_attempts, i.backoff_base, i.backoff_factor,
       i.backoff_cap, i.timeout_s, i.delivery, i.one_shot, i.trigger, i.idempotency_key,
       i.request_hash, %(now)s, i.target::json, i.concurrency_key, i.misfire_at,
       i.retry_rules::json, i.origin, i.partition_key
FROM jsonb_to_recordset(%(batch)s::jsonb) AS i(
    id uuid, job_id uuid, partition_key smallint, tenant text, job_name text, task text,
    queue text, payload text, scheduled_for timestamptz, available_at timestamptz, priority int,
    max_attempts int, backoff_base float8, backoff_factor float8, backoff_cap float8,
    timeout_s float8, delivery text, one_shot bool, trigger text, idempotency_key text,
    request_hash text,
    target text, concurrency_key text, misfire_at timestamptz, retry_rules text, origin text
)
ON CONFLICT DO NOTHING
RETURNING id, job_id;

-- name: notify_runs
SELECT pg_notify('duetime_runs', '');

-- fragment: trigger_from_job
-- The one-round-trip manual run (run_trigger_by_id / _by_name): its job in `j`, then this
-- insert and the answer (trigger_answer: with NOTIFY when a run was made). Nothing comes back when the job is
-- missing or cancelled or the idempotency key already has a run: the store then takes the
-- transaction that tells which. The values are store/_values.py's trigger_run_values; the
-- concurrency key is its overlap_key (a test holds the two together).
t AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now),
ins AS (
    INSERT INTO runs (
        id, job_id, tenant, job_name, task, queue, payload, scheduled_for, available_at,
        state, priority, max_attempts, backoff_base, backoff_factor, backoff_cap, timeout_s,
        delivery, one_shot, trigger, idempotency_key, request_hash, created_at, target,
        concurrency_key, retry_rules, partition_key
    )
    SELECT %(id)s, j.id, j.tenant, j.name, j.task, j.queue,
           coalesce(%(payload)s::text::json, j.payload), t.now, t.now, 'scheduled',
           coalesce(%(priority)s::int, j.priority), j.max_attempts, j.backoff_base,
           j.backoff_factor, j.backoff_cap, j.timeout_s, j.delivery, false, 'manual',
           %(idempotency_key)s, %(request_hash)s, t.now, j.target,
           CASE WHEN j.concurrency_key IS NOT NULL THEN 'key:' || j.concurrency_key
                WHEN j.overlap_policy = 'allow' AND j.max_concurrency = 0 THEN NULL
                ELSE 'job:' || j.id::text END,
           j.retry_rules, j.partition_key
    FROM j CROSS JOIN t
    ON CONFLICT DO NOTHING
    RETURNING *
)

-- fragment: trigger_answer
SELECT ins.*, (SELECT pg_notify('duetime_runs', '') FROM ins LIMIT 1) AS notified FROM ins

-- fragment: trigger_audit
-- The call's audit record (docs/decisions/0021) in the trigger's own statement: written only
-- when the run was, so the trigger stays one round trip.
, aud AS (
    INSERT INTO audit (id, tenant, at, actor, action, subject_kind, subject_id, subject_name,
                       change)
    SELECT %(audit_id)s, ins.tenant, ins.created_at, %(audit_actor)s, %(audit_action)s, 'job',
           ins.job_id::text, ins.job_name, jsonb_build_object('run', ins.id::text)
    FROM ins
)

-- name: run_trigger_by_id
WITH j AS (SELECT * FROM jobs WHERE tenant = %(tenant)s AND id = %(job_id)s
           AND status <> 'cancelled'),
{{trigger_from_job}}
{{trigger_answer}};

-- name: run_trigger_by_name
WITH j AS (SELECT * FROM jobs WHERE tenant = %(tenant)s AND name = %(job_name)s
           AND status <> 'cancelled'),
{{trigger_from_job}}
{{trigger_answer}};

-- name: run_trigger_by_id_audited
WITH j AS (SELECT * FROM jobs WHERE tenant = %(tenant)s AND id = %(job_id)s
           AND status <> 'cancelled'),
{{trigger_from_job}}
{{trigger_audit}}
{{trigger_answer}};

-- name: run_trigger_by_name_audited
WITH j AS (SELECT * FROM jobs WHERE tenant = %(tenant)s AND name = %(job_name)s
           AND status <> 'cancelled'),
{{trigger_from_job}}
{{trigger_audit}}
{{trigger_answer}};

-- name: run_get
SELECT * FROM runs WHERE tenant = %(tenant)s AND id = %(id)s;

-- name: run_get_by_key
SELECT * FROM runs WHERE job_id = %(job_id)s AND idempotency_key = %(idempotency_key)s;

-- name: runs_list
SELECT * FROM runs
WHERE tenant = %(tenant)s
  AND (%(job_id)s::uuid IS NULL OR job_id = %(job_id)s::uuid)
  AND (%(state)s::text IS NULL OR state = %(state)s::text)
  AND (%(task)s::text IS NULL OR task = %(task)s::text)
  AND (%(since)s::timestamptz IS NULL OR scheduled_for >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR scheduled_for < %(until)s::timestamptz)
  AND (%(before_at)s::timestamptz IS NULL
       OR (scheduled_for, id) < (%(before_at)s::timestamptz, %(before_id)s::uuid))
ORDER BY scheduled_for DESC, id DESC
LIMIT %(limit)s;

-- name: runs_withdraw_pending
-- A job's scheduled runs withdrawn before their instant (paused, schedule changed), deleted
-- before runs_end_pending ends the rest: never due and never started (a first attempt at most
-- claimed ahead, no attempt recorded), they are no history, and the occurrence is free for the
-- new schedule to write again (runs are unique per job and instant; decision 0019).
DELETE FROM runs
WHERE job_id = %(job_id)s AND trigger = 'schedule' AND scheduled_for > %(now)s
  AND ((state = 'scheduled' AND attempt = 0)
       OR (state = 'running' AND started_at IS NULL AND attempt = 1))
  AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.run_id = runs.id);

-- name: runs_end_pending
UPDATE runs SET state = %(state)s, reason = %(reason)s, finished_at = %(now)s,
    token = token + 1, lease_owner = NULL, lease_expires_at = NULL
WHERE job_id = %(job_id)s AND (trigger = 'schedule' OR %(include_manual)s)
  AND (state = 'scheduled' OR (state = 'running' AND started_at IS NULL))
RETURNING id;

-- name: run_start
-- started_at is the later of now and the run's instant: a worker writes a start shortly
-- before the instant (worker/starter.py) and calls the task at the instant.
-- Fenced by token, refused on a lapsed lease (the reaper may be about to take the run over),
-- and renewing the lease so a run that starts has a full lease ahead of it.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now)
UPDATE runs SET started_at = greatest(t.now, runs.available_at),
    lease_expires_at = CASE WHEN %(lease_ttl)s::float8 IS NULL THEN runs.lease_expires_at
                            ELSE t.now + make_interval(secs => %(lease_ttl)s::float8) END
FROM t
WHERE id = %(id)s AND token = %(token)s AND state || '' = 'running' AND started_at IS NULL
  AND runs.lease_expires_at > t.now
  AND EXISTS (
      SELECT 1 FROM jobs
      WHERE jobs.id = runs.job_id
        AND (jobs.status IN ('active', 'completed')
             OR (jobs.status = 'paused' AND runs.trigger = 'manual'))
  )
RETURNING runs.id;

-- name: runs_start
-- run_start for a batch of runs claimed ahead, in one statement: the same fencing, lease and job
-- checks, for the runs WITHOUT an overlap key. Each run is looked up by its primary key and
-- locked (LATERAL + LIMIT + FOR UPDATE: never a plan through the partial indexes of running
-- runs, whose statistics rarely know how many runs are in flight, nor a join of the batch
-- against all runs); the checks read the locked, latest row, so the token is fenced; the
-- update then reaches exactly those rows by `id = ANY(...)`. The caller sends the batch sorted
-- by id, so batches over the same rows lock them in one order. Runs WITH an overlap key still
-- waiting to start come back (unlocked) with their key, for the locked path in the same
-- transaction; the started ones with a NULL key.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now),
batch AS (
    SELECT i.token AS sent, k.* FROM unnest(%(ids)s::uuid[], %(tokens)s::bigint[]) AS i(id, token)
    CROSS JOIN LATERAL (
        SELECT runs.id, runs.job_id, runs.token, runs.state, runs.started_at, runs.trigger,
               runs.concurrency_key, runs.lease_expires_at
        FROM runs WHERE runs.id = i.id AND runs.concurrency_key IS NULL LIMIT 1 FOR UPDATE
    ) k
),
startable AS (
    SELECT b.id FROM batch b, t
    WHERE b.token = b.sent AND b.state = 'running' AND b.started_at IS NULL
      AND b.lease_expires_at > t.now
      AND EXISTS (
          SELECT 1 FROM jobs
          WHERE jobs.id = b.job_id
            AND (jobs.status IN ('active', 'completed')
                 OR (jobs.status = 'paused' AND b.trigger = 'manual'))
      )
),
started AS (
    UPDATE runs r SET started_at = greatest(t.now, r.available_at),
        lease_expires_at = CASE WHEN %(lease_ttl)s::float8 IS NULL THEN r.lease_expires_at
                                ELSE t.now + make_interval(secs => %(lease_ttl)s::float8) END
    FROM t
    WHERE r.id = ANY(ARRAY(SELECT id FROM startable))
    RETURNING r.id
)
SELECT id, NULL::text AS concurrency_key FROM started
UNION ALL
SELECT k.id, k.concurrency_key
FROM unnest(%(ids)s::uuid[], %(tokens)s::bigint[]) AS i(id, token)
-- LATERAL + LIMIT (never pulled up, nothing pushed into it): a primary-key lookup per run
CROSS JOIN LATERAL (SELECT runs.* FROM runs WHERE runs.id = i.id LIMIT 1) k
WHERE k.token = i.token AND k.state = 'running' AND k.started_at IS NULL
  AND k.concurrency_key IS NOT NULL;

-- name: runs_heartbeat
-- The runs (id, token) this worker still holds, and their leases extended. Each row is looked
-- up by primary key; rows another transaction has locked right now (a start or completion of
-- this worker under way) are skipped, not waited for — a heartbeat locking thousands of rows
-- otherwise deadlocks with those batches — and still reported held (from the snapshot): they
-- are renewed by the next heartbeat, a third of a lease later. A remote worker's lease is
-- (tenant, lease owner): %(tenant)s, when set, must be the run's.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now),
held AS (
    SELECT k.id, k.token FROM unnest(%(ids)s::uuid[], %(tokens)s::bigint[]) AS i(id, token)
    -- LATERAL + LIMIT: a primary-key lookup per run
    CROSS JOIN LATERAL (
        SELECT runs.id, runs.token, runs.state, runs.lease_owner, runs.tenant FROM runs
        WHERE runs.id = i.id LIMIT 1
    ) k
    WHERE k.token = i.token AND k.state = 'running' AND k.lease_owner = %(worker_id)s
      AND (%(tenant)s::text IS NULL OR k.tenant = %(tenant)s::text)
),
locked AS (
    SELECT k.id FROM held h
    CROSS JOIN LATERAL (
        SELECT runs.id FROM runs
        WHERE runs.id = h.id AND runs.token = h.token AND runs.state = 'running'
          AND runs.lease_owner = %(worker_id)s
        LIMIT 1 FOR UPDATE SKIP LOCKED
    ) k
),
renewed AS (
    UPDATE runs r SET lease_expires_at = t.now + make_interval(secs => %(lease_ttl)s)
    FROM t
    WHERE r.id = ANY(ARRAY(SELECT id FROM locked))
    RETURNING r.id
)
SELECT id FROM held;

-- name: runs_complete
-- The fenced end of a batch of attempts, one statement (its input one typed array per column,
-- binary, built by store/postgres/arrays.py: nothing to parse but a result's JSON;
-- docs/decisions/0015; each (run, token) sent once): the runs
-- still `running` with the attempt's token take the outcome — the fencing check is the
-- update's own WHERE, each run found through the primary key, no lookup before it; every
-- attempt is recorded (`stale` where refused, its job and tenant read for those few only);
-- one-shot jobs whose run ended become `completed`. A run going back to `scheduled` (a retry,
-- a run handed back) whose job was cancelled meanwhile ends `cancelled` instead: nothing
-- would ever claim it. With %(tenant)s (a remote worker), another tenant's run is neither
-- completed nor recorded.
WITH {{completion}}
SELECT d.id AS run_id, d.token FROM done d;

-- name: runs_complete_outbox
-- runs_complete with the messages of the broker runs it ended (`message_*`: an array per
-- column, each message with its attempt's run_id and token) inserted into the outbox by the same
-- statement, only for the (run, token) pairs the fence let through: a broker run's completion
-- is one round trip, its clock read included (docs/decisions/0026, 0040). Its rows are
-- announced as outbox_insert's are (one NOTIFY duetime_outbox, delivered at the commit). A row
-- per ended run, each with the statement's instant (the rest of the caller's transaction, if
-- any, uses it); when none ended, one row of that instant with a NULL run_id.
WITH {{completion}},
queued AS (
    INSERT INTO outbox (message_id, tenant, run_id, attempt, connection, target, body, headers,
                        created_at, available_at)
    SELECT m.message_id, m.tenant, m.run_id, m.attempt, m.connection, m.target, m.body,
           m.headers, t.now, t.now
    FROM unnest(%(message_id)s::text[], %(message_tenant)s::text[], %(message_run_id)s::uuid[],
                %(message_token)s::bigint[], %(message_attempt)s::int[],
                %(message_connection)s::text[], %(message_target)s::jsonb[],
                %(message_body)s::text[], %(message_headers)s::jsonb[])
         AS m(message_id, tenant, run_id, token, attempt, connection, target, body, headers)
    JOIN done d ON d.id = m.run_id AND d.token = m.token
    CROSS JOIN t
    ON CONFLICT (message_id) DO NOTHING
    RETURNING 1
),
notified AS (SELECT pg_notify('duetime_outbox', '') FROM (SELECT 1 FROM queued LIMIT 1) q)
SELECT d.id AS run_id, d.token, t.now, (SELECT count(*) FROM notified) AS notified
FROM t LEFT JOIN done d ON true;

-- fragment: completion
-- runs_complete's work (above), every CTE but the answer: `done` holds the runs it ended.
t AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now),
input AS (
    -- an array per column; one whose values are all NULL comes empty (unnest pads it with
    -- NULLs). They pass through a subquery kept as it is (OFFSET 0), so the planner cannot count
    -- them and plans the input at a fixed guess of 10 rows, as in a generic plan: a run probed
    -- through the primary key per input row, whatever the batch's size (a batch known to hold
    -- 500 was joined to runs by hash over a sequential scan of every run)
    SELECT i.*, 'running'::text AS from_state
    FROM (
        SELECT %(run_id)s::uuid[] AS run_id, %(token)s::bigint[] AS token,
               %(next_state)s::text[] AS next_state,
               %(available_at)s::timestamptz[] AS available_at, %(reason)s::text[] AS reason,
               %(error_class)s::text[] AS error_class,
               %(error_message)s::text[] AS error_message,
               %(traceback)s::text[] AS traceback, %(worker_id)s::text[] AS worker_id,
               %(number)s::int[] AS number, %(claimed_at)s::timestamptz[] AS claimed_at,
               %(started_at)s::timestamptz[] AS started_at, %(outcome)s::text[] AS outcome,
               %(completes_job)s::bool[] AS completes_job,
               %(refund_attempt)s::bool[] AS refund_attempt, %(result)s::text[] AS result
        OFFSET 0
    ) a
    CROSS JOIN LATERAL unnest(
        a.run_id, a.token, a.next_state, a.available_at, a.reason, a.error_class,
        a.error_message, a.traceback, a.worker_id, a.number, a.claimed_at, a.started_at,
        a.outcome, a.completes_job, a.refund_attempt, a.result
    ) AS i(
        run_id, token, next_state, available_at, reason, error_class, error_message, traceback,
        worker_id, number, claimed_at, started_at, outcome, completes_job, refund_attempt, result
    )
),
orphaned AS MATERIALIZED (
    -- runs going back to `scheduled` whose job is cancelled (retries and hand-backs only)
    SELECT r.id FROM runs r JOIN jobs j ON j.id = r.job_id
    WHERE r.id = ANY(ARRAY(SELECT run_id FROM input WHERE next_state = 'scheduled'))
      AND j.status = 'cancelled'
),
done AS (
    UPDATE runs r SET
        state = CASE WHEN o.id IS NULL THEN i.next_state ELSE 'cancelled' END,
        attempt = r.attempt - CASE WHEN i.refund_attempt THEN 1 ELSE 0 END,
        available_at = coalesce(i.available_at, r.available_at),
        finished_at = CASE WHEN i.next_state = 'scheduled' AND o.id IS NULL THEN NULL
                           ELSE t.now END,
        lease_owner = NULL, lease_expires_at = NULL,
        -- a run going back to `scheduled` is asked nothing any more (decision 0016)
        cancel_requested = r.cancel_requested AND i.next_state <> 'scheduled',
        replace_deadline = CASE WHEN i.next_state = 'scheduled' THEN NULL
                                ELSE r.replace_deadline END,
        reason = CASE WHEN o.id IS NULL THEN i.reason ELSE 'cancelled' END,
        last_error_class = i.error_class, last_error_message = i.error_message,
        result = i.result::json
    FROM input i CROSS JOIN t LEFT JOIN orphaned o ON o.id = i.run_id
    -- each input row's run through the primary key (an index probe per row: with the run
    -- set as an array instead, a plan that misjudged either side joined them by nested loop
    -- and compared every run with every input row, 266-389 ms a batch). The run must still
    -- be `running`, compared with the input's `from_state`, not a constant: the statistics
    -- of running runs (they rarely know how many are in flight) then play no part in the
    -- plan, and no partial index of running runs (a scan of one reads every running run's
    -- entries, dead ones included) matches
    WHERE r.id = i.run_id AND r.token = i.token AND r.state = i.from_state
      AND (%(tenant)s::text IS NULL OR r.tenant = %(tenant)s::text)
    RETURNING r.id, r.job_id, r.tenant, r.state, i.token, i.number, i.worker_id, i.claimed_at,
              i.started_at, i.outcome, i.error_class, i.error_message, i.traceback,
              i.completes_job
),
completed_jobs AS (
    UPDATE jobs j SET status = 'completed', next_fire_at = NULL, updated_at = t.now
    FROM done d, t
    WHERE j.id = d.job_id AND d.completes_job AND d.state <> 'scheduled'
      AND j.status IN ('active', 'paused')
),
refused_updated AS (
    -- attempts the fence refused whose run this statement updated for another token (its
    -- row cannot be locked twice by one statement), with that run's job and tenant
    SELECT i.*, d.job_id, d.tenant FROM input i JOIN done d ON d.id = i.run_id
    WHERE i.token <> d.token
),
refused AS (
    -- every other refused attempt, its run read locked (KEY SHARE): a delete of the run
    -- (retention, a job's delete) either waits for this record, then deletes it with the
    -- run, or ends first, and then no record is made for a run that is gone
    SELECT i.*, r.job_id, r.tenant FROM input i JOIN runs r ON r.id = i.run_id
    WHERE r.id = ANY(ARRAY(SELECT x.run_id FROM input x WHERE x.run_id NOT IN (
        SELECT d.id FROM done d
    )))
      AND (%(tenant)s::text IS NULL OR r.tenant = %(tenant)s::text)
    FOR KEY SHARE OF r
),
recorded AS (
    INSERT INTO attempts (
        run_id, token, job_id, tenant, number, worker_id, claimed_at, started_at,
        finished_at, outcome, error_class, error_message, traceback
    )
    SELECT d.id, d.token, d.job_id, d.tenant, d.number, d.worker_id, d.claimed_at,
           d.started_at, t.now, d.outcome, d.error_class, d.error_message, d.traceback
    FROM done d CROSS JOIN t
    UNION ALL
    SELECT f.run_id, f.token, f.job_id, f.tenant, f.number, f.worker_id, f.claimed_at,
           f.started_at, t.now, 'stale', f.error_class, f.error_message, f.traceback
    FROM (SELECT * FROM refused_updated UNION ALL SELECT * FROM refused) f CROSS JOIN t
    ON CONFLICT (run_id, token, claimed_at) DO UPDATE SET
        outcome = excluded.outcome, finished_at = excluded.finished_at,
        started_at = coalesce(attempts.started_at, excluded.started_at),
        error_class = excluded.error_class, error_message = excluded.error_message,
        traceback = excluded.traceback
    -- only a takeover's record (lost, cancelled) turns stale; an applied outcome stays
    WHERE attempts.outcome IN ('lost', 'cancelled')
)

-- name: leases_expired
-- A run a newer one replaces (decision 0016) stays until its replace_deadline has passed:
-- its handler may still run (a worker shutting down lets the lease run out), so its
-- successor waits for it until then.
SELECT * FROM runs
WHERE state = 'running' AND lease_expires_at < %(now)s
  AND (replace_deadline IS NULL OR replace_deadline < %(now)s)
ORDER BY lease_expires_at
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED;

-- name: runs_reap
WITH input AS (
    SELECT * FROM unnest(%(id)s::uuid[], %(token)s::bigint[], %(next_state)s::text[],
                         %(reason)s::text[]) AS i(id, token, next_state, reason)
),
reaped AS (
    UPDATE runs r SET
        state = i.next_state, token = r.token + 1, lease_owner = NULL, lease_expires_at = NULL,
        available_at = %(now)s, reason = i.reason,
        -- claimed ahead and never started: its attempt is given back (nothing of it ran)
        attempt = r.attempt - CASE WHEN i.next_state = 'scheduled' AND r.started_at IS NULL
                                   THEN 1 ELSE 0 END,
        finished_at = CASE WHEN i.next_state = 'scheduled' THEN NULL ELSE %(now)s END,
        cancel_requested = r.cancel_requested AND i.next_state <> 'scheduled',
        replace_deadline = CASE WHEN i.next_state = 'scheduled' THEN NULL
                                ELSE r.replace_deadline END
    FROM input i
    WHERE r.id = i.id AND r.token = i.token AND r.state = 'running'
    RETURNING r.id
)
SELECT id FROM reaped;

-- name: attempts_insert
INSERT INTO attempts (
    run_id, token, job_id, tenant, number, worker_id, claimed_at, started_at, finished_at,
    outcome, error_class, error_message
)
SELECT * FROM unnest(
    %(run_id)s::uuid[], %(token)s::bigint[], %(job_id)s::uuid[], %(tenant)s::text[],
    %(number)s::int[], %(worker_id)s::text[], %(claimed_at)s::timestamptz[],
    %(started_at)s::timestamptz[], %(finished_at)s::timestamptz[], %(outcome)s::text[],
    %(error_class)s::text[], %(error_message)s::text[]
)
ON CONFLICT (run_id, token, claimed_at) DO NOTHING;

-- name: runs_replay
WITH picked AS (
    SELECT runs.id FROM runs
    WHERE tenant = %(tenant)s AND state = 'dead'
      AND (%(job_id)s::uuid IS NULL OR job_id = %(job_id)s::uuid)
      AND (%(run_ids)s::uuid[] IS NULL OR id = ANY(%(run_ids)s::uuid[]))
      -- a workflow step's run is retried through its instance (app.workflows.retry)
      AND NOT EXISTS (SELECT 1 FROM workflow_steps s WHERE s.run_id = runs.id)
    ORDER BY finished_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE runs r SET
    state = 'scheduled', available_at = %(now)s, finished_at = NULL, reason = NULL,
    replays = r.replays + 1, retry_from = %(now)s,  -- a fresh retry window (retry.within)
    max_attempts = r.attempt + coalesce(%(max_attempts)s::int, j.max_attempts)
FROM picked, jobs j
WHERE r.id = picked.id AND j.id = r.job_id AND r.state = 'dead'
RETURNING r.id;

-- name: run_lock
SELECT * FROM runs WHERE tenant = %(tenant)s AND id = %(id)s FOR UPDATE;

-- name: run_cancel
UPDATE runs SET
    state = 'cancelled', token = token + 1, reason = 'cancelled', finished_at = %(now)s,
    lease_owner = NULL, lease_expires_at = NULL,
    cancel_requested = (state = 'running')  -- its worker sees it: ctx.cancelled
WHERE tenant = %(tenant)s AND id = %(id)s AND state IN ('scheduled', 'running')
RETURNING *;

-- name: attempts_list
SELECT * FROM attempts WHERE tenant = %(tenant)s AND run_id = %(run_id)s ORDER BY number, token;

-- name: skips_insert
INSERT INTO run_skips (job_id, first_at, last_at, count, reason, created_at)
SELECT i.*, %(now)s FROM unnest(
    %(job_id)s::uuid[], %(first_at)s::timestamptz[], %(last_at)s::timestamptz[],
    %(count)s::int[], %(reason)s::text[]
) AS i(job_id, first_at, last_at, count, reason);

-- name: skips_list
SELECT s.* FROM run_skips s JOIN jobs j ON j.id = s.job_id
WHERE j.tenant = %(tenant)s AND s.job_id = %(job_id)s
ORDER BY s.first_at;

-- name: runs_by_id_prefix
-- The runs whose id's text form begins with a prefix: the uuid range [low, high] that prefix
-- spans (abcd1234-0000-… to abcd1234-ffff-…), a range scan of the primary key.
SELECT * FROM runs
WHERE id BETWEEN %(low)s::uuid AND %(high)s::uuid AND tenant = %(tenant)s
ORDER BY id
LIMIT %(limit)s;

-- name: runs_withdraw_outside
-- runs_withdraw_pending for the runs outside a job's new bounds (see runs_end_outside).
DELETE FROM runs
WHERE job_id = %(job_id)s AND trigger = 'schedule' AND scheduled_for > %(now)s
  AND ((state = 'scheduled' AND attempt = 0)
       OR (state = 'running' AND started_at IS NULL AND attempt = 1))
  AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.run_id = runs.id)
  AND (scheduled_for < %(start_at)s::timestamptz OR scheduled_for > %(end_at)s::timestamptz);

-- name: runs_end_outside
-- A job's not-yet-started scheduled runs outside its new bounds (before `start_at`, after
-- `end_at`; NULL: unbounded) → skipped, token bumped (fences a worker holding one).
UPDATE runs SET state = 'skipped', reason = 'out_of_bounds', finished_at = %(now)s,
    token = token + 1, lease_owner = NULL, lease_expires_at = NULL
WHERE job_id = %(job_id)s AND trigger = 'schedule'
  AND (state = 'scheduled' OR (state = 'running' AND started_at IS NULL))
  AND (scheduled_for < %(start_at)s::timestamptz OR scheduled_for > %(end_at)s::timestamptz)
RETURNING id;
