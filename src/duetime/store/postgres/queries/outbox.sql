-- The transactional outbox (docs/brokers.md, decision 0026). Rows are inserted by the
-- completion of a broker run, in its transaction; relays claim, publish and mark them.

-- name: outbox_insert
-- The messages of the broker runs a completion applied (a JSON array of objects); a message
-- id already present (the same attempt completed twice cannot happen: completions are fenced)
-- is left as it is.
INSERT INTO outbox (message_id, tenant, run_id, attempt, connection, target, body, headers,
                    created_at, available_at)
SELECT m.message_id, m.tenant, m.run_id, m.attempt, m.connection, m.target, m.body, m.headers,
       %(now)s::timestamptz, %(now)s::timestamptz
FROM jsonb_to_recordset(%(batch)s::jsonb) AS m(message_id text, tenant text, run_id uuid,
     attempt integer, connection text, target jsonb, body text, headers jsonb)
ON CONFLICT (message_id) DO NOTHING;

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
