-- The transactional outbox (docs/brokers.md, decision 0026). Rows are inserted by the
-- completion of a broker run, in its statement (runs_complete_outbox in runs.sql); relays
-- claim, publish and mark them.

-- name: outbox_claim
-- Due pending rows of the relay's connections, oldest first; skipped while another relay holds
-- them; each hidden for the lease (its available_at moves on) and its tries counted. The ids
-- are an array (an InitPlan): the update then finds each row by its primary key instead of
-- joining the batch against the whole table.
UPDATE outbox o
SET available_at = coalesce(%(now)s::timestamptz, clock_timestamp())
                   + make_interval(secs => %(lease)s),
    tries = o.tries + 1
WHERE o.id = ANY(ARRAY(
    SELECT id FROM outbox
    WHERE sent_at IS NULL AND dead_at IS NULL
      AND available_at <= coalesce(%(now)s::timestamptz, clock_timestamp())
      AND connection = ANY(%(connections)s::text[])
    ORDER BY available_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
))
RETURNING o.id, o.message_id, o.tenant, o.run_id, o.attempt, o.connection, o.target, o.body,
          o.headers, o.created_at, o.tries, o.last_error, o.sent_at, o.dead_at;

-- name: outbox_sent
UPDATE outbox SET sent_at = coalesce(%(now)s::timestamptz, clock_timestamp())
WHERE id = ANY(%(ids)s::bigint[]) AND sent_at IS NULL;

-- name: outbox_retry
-- batch: [[id, delay in seconds, error], …]; a row sent or dead meanwhile is left alone.
UPDATE outbox o
SET available_at = coalesce(%(now)s::timestamptz, clock_timestamp()) + make_interval(secs => (e->>1)::float8),
    last_error = e->>2
FROM jsonb_array_elements(%(batch)s::jsonb) AS e
WHERE o.id = (e->>0)::bigint AND o.sent_at IS NULL AND o.dead_at IS NULL;

-- name: outbox_dead
-- batch: [[id, error], …]
UPDATE outbox o
SET dead_at = coalesce(%(now)s::timestamptz, clock_timestamp()), last_error = e->>1
FROM jsonb_array_elements(%(batch)s::jsonb) AS e
WHERE o.id = (e->>0)::bigint AND o.sent_at IS NULL AND o.dead_at IS NULL;

-- name: outbox_dead_list
SELECT id, message_id, tenant, run_id, attempt, connection, target, body, headers, created_at,
       tries, last_error, sent_at, dead_at
FROM outbox
WHERE dead_at IS NOT NULL
  AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
  AND id > %(after_id)s
ORDER BY id
LIMIT %(limit)s;

-- name: outbox_replay
UPDATE outbox
SET dead_at = NULL, tries = 0,
    available_at = coalesce(%(now)s::timestamptz, clock_timestamp())
WHERE dead_at IS NOT NULL
  AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
  AND (%(ids)s::bigint[] IS NULL OR id = ANY(%(ids)s::bigint[]));

-- name: outbox_pending_counts
SELECT connection, count(*) AS n, min(created_at) AS oldest
FROM outbox
WHERE sent_at IS NULL AND dead_at IS NULL
GROUP BY connection
ORDER BY connection;

-- name: outbox_dead_count
SELECT count(*) AS n FROM outbox WHERE dead_at IS NOT NULL;

-- name: outbox_prune
-- Sent rows before the cut, oldest first, in batches (a dead or pending row is never pruned);
-- the ids as an array, found by primary key (as in outbox_claim).
DELETE FROM outbox
WHERE id = ANY(ARRAY(
    SELECT id FROM outbox
    WHERE sent_at < %(before)s::timestamptz
    ORDER BY sent_at
    LIMIT %(limit)s
));

-- name: outbox_run_events
-- Run events (docs/brokers.md, "Run events"), in the transaction of the change they report:
-- for each run of %(ids)s, the event its state now names (running and started: `started`;
-- scheduled again: `retrying`; succeeded, dead, cancelled, skipped: as named) when it is one
-- of %(kinds)s and the run's tenant one of %(tenants)s (NULL: every tenant). The message id
-- `<run id>:<token>:<event>` names one event: written twice, it is left as it is.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now),
e AS (
    SELECT r.*, CASE
        WHEN r.state = 'running' AND r.started_at IS NOT NULL THEN 'started'
        WHEN r.state = 'scheduled' THEN 'retrying'
        WHEN r.state IN ('succeeded', 'dead', 'cancelled', 'skipped') THEN r.state
    END AS event
    FROM runs r
    WHERE r.id = ANY(%(ids)s::uuid[])
      AND (%(tenants)s::text[] IS NULL OR r.tenant = ANY(%(tenants)s::text[]))
),
m AS (
    SELECT e.*, e.id::text || ':' || e.token || ':' || e.event AS message_id, t.now AS t_now,
           to_char(t.now AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at,
           to_char(e.scheduled_for AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS due
    FROM e CROSS JOIN t
    WHERE e.event = ANY(%(kinds)s::text[])
)
INSERT INTO outbox (message_id, tenant, run_id, attempt, connection, target, body, headers,
                    created_at, available_at)
SELECT m.message_id, m.tenant, m.id, m.attempt, %(connection)s, %(target)s::jsonb,
       jsonb_build_object(
           'event', m.event, 'message_id', m.message_id, 'at', m.at,
           'run_id', m.id, 'job_id', m.job_id, 'job', m.job_name, 'tenant', m.tenant,
           'task', m.task, 'queue', m.queue, 'trigger', m.trigger, 'scheduled_for', m.due,
           'attempt', m.attempt, 'max_attempts', m.max_attempts, 'state', m.state,
           'reason', m.reason, 'error_class', m.last_error_class,
           'claimed_at', to_char(m.claimed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
           'started_at', to_char(m.started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
           'finished_at', to_char(m.finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
       )::text,
       jsonb_build_object(
           'duetime-message-id', m.message_id, 'duetime-event', m.event,
           'duetime-run-id', m.id::text, 'duetime-job', m.job_name, 'duetime-tenant', m.tenant,
           'duetime-scheduled-for', m.due
       ),
       m.t_now, m.t_now
FROM m
ORDER BY m.id
ON CONFLICT (message_id) DO NOTHING;

-- name: outbox_skip_events
-- `skipped` events of occurrences the scheduler recorded as skipped without a run (one per
-- skip range: its first and last instant, count and reason), in the scheduler's transaction.
-- The message id `skip:<job id>:<first instant>` names one range; run_id is the nil uuid.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now),
s AS (
    SELECT i.*, j.name, j.tenant,
           to_char(i.first_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS first,
           to_char(i.last_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS last,
           to_char(t.now AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at,
           t.now AS t_now
    FROM unnest(
        %(job_id)s::uuid[], %(first_at)s::timestamptz[], %(last_at)s::timestamptz[],
        %(count)s::int[], %(reason)s::text[]
    ) AS i(job_id, first_at, last_at, count, reason)
    JOIN jobs j ON j.id = i.job_id
    CROSS JOIN t
    WHERE 'skipped' = ANY(%(kinds)s::text[])
      AND (%(tenants)s::text[] IS NULL OR j.tenant = ANY(%(tenants)s::text[]))
),
m AS (SELECT s.*, 'skip:' || s.job_id::text || ':' || s.first AS message_id FROM s)
INSERT INTO outbox (message_id, tenant, run_id, attempt, connection, target, body, headers,
                    created_at, available_at)
SELECT m.message_id, m.tenant, '00000000-0000-0000-0000-000000000000'::uuid, 0,
       %(connection)s, %(target)s::jsonb,
       jsonb_build_object(
           'event', 'skipped', 'message_id', m.message_id, 'at', m.at, 'run_id', NULL,
           'job_id', m.job_id, 'job', m.name, 'tenant', m.tenant, 'scheduled_for', m.first,
           'last', m.last, 'count', m.count, 'state', 'skipped', 'reason', m.reason,
           'attempt', 0
       )::text,
       jsonb_build_object(
           'duetime-message-id', m.message_id, 'duetime-event', 'skipped',
           'duetime-job', m.name, 'duetime-tenant', m.tenant, 'duetime-scheduled-for', m.first
       ),
       m.t_now, m.t_now
FROM m
ON CONFLICT (message_id) DO NOTHING;
