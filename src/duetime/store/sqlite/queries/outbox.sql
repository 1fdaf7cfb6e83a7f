-- The transactional outbox (docs/brokers.md, decision 0026); see the PostgreSQL queries. One
-- writer at a time (BEGIN IMMEDIATE): a claim needs no SKIP LOCKED.

-- name: outbox_insert
INSERT INTO outbox (message_id, tenant, run_id, attempt, connection, target, body, headers,
                    created_at, available_at)
SELECT json_extract(value, '$.message_id'), json_extract(value, '$.tenant'),
       json_extract(value, '$.run_id'), json_extract(value, '$.attempt'),
       json_extract(value, '$.connection'), json(json_extract(value, '$.target')),
       json_extract(value, '$.body'), json(json_extract(value, '$.headers')), :now, :now
FROM json_each(:batch)
WHERE true
ON CONFLICT (message_id) DO NOTHING;

-- name: outbox_claim
UPDATE outbox
SET available_at = :now
                   + CAST(:lease * 1000000 AS INTEGER),
    tries = tries + 1
WHERE id IN (
    SELECT id FROM outbox
    WHERE sent_at IS NULL AND dead_at IS NULL
      AND available_at <= :now
      AND connection IN (SELECT value FROM json_each(:connections))
    ORDER BY available_at, id
    LIMIT :limit
)
RETURNING id, message_id, tenant, run_id, attempt, connection, target, body, headers,
          created_at, tries, last_error, sent_at, dead_at;

-- name: outbox_sent
UPDATE outbox
SET sent_at = :now
WHERE id IN (SELECT value FROM json_each(:ids)) AND sent_at IS NULL;

-- name: outbox_retry
UPDATE outbox
SET available_at = :now
                   + CAST((SELECT json_extract(e.value, '$[1]') FROM json_each(:batch) e
                           WHERE json_extract(e.value, '$[0]') = outbox.id) * 1000000 AS INTEGER),
    last_error = (SELECT json_extract(e.value, '$[2]') FROM json_each(:batch) e
                  WHERE json_extract(e.value, '$[0]') = outbox.id)
WHERE id IN (SELECT json_extract(value, '$[0]') FROM json_each(:batch))
  AND sent_at IS NULL AND dead_at IS NULL;

-- name: outbox_dead
UPDATE outbox
SET dead_at = :now,
    last_error = (SELECT json_extract(e.value, '$[1]') FROM json_each(:batch) e
                  WHERE json_extract(e.value, '$[0]') = outbox.id)
WHERE id IN (SELECT json_extract(value, '$[0]') FROM json_each(:batch))
  AND sent_at IS NULL AND dead_at IS NULL;

-- name: outbox_dead_list
SELECT id, message_id, tenant, run_id, attempt, connection, target, body, headers, created_at,
       tries, last_error, sent_at, dead_at
FROM outbox
WHERE dead_at IS NOT NULL
  AND (:tenant IS NULL OR tenant = :tenant)
  AND id > :after_id
ORDER BY id
LIMIT :limit;

-- name: outbox_replay
UPDATE outbox
SET dead_at = NULL, tries = 0,
    available_at = :now
WHERE dead_at IS NOT NULL
  AND (:tenant IS NULL OR tenant = :tenant)
  AND (:ids IS NULL OR id IN (SELECT value FROM json_each(:ids)));

-- name: outbox_pending_counts
SELECT connection, count(*) AS n, min(created_at) AS oldest
FROM outbox
WHERE sent_at IS NULL AND dead_at IS NULL
GROUP BY connection
ORDER BY connection;

-- name: outbox_dead_count
SELECT count(*) AS n FROM outbox WHERE dead_at IS NOT NULL;

-- name: outbox_prune
DELETE FROM outbox
WHERE id IN (
    SELECT id FROM outbox WHERE sent_at < :before ORDER BY sent_at LIMIT :limit
);

-- name: outbox_run_events
-- Run events, in the transaction of the change they report; see the PostgreSQL queries.
-- :ids, :kinds, :tenants are JSON arrays (:tenants NULL: every tenant).
WITH e AS (
    SELECT r.*, CASE
        WHEN r.state = 'running' AND r.started_at IS NOT NULL THEN 'started'
        WHEN r.state = 'scheduled' THEN 'retrying'
        WHEN r.state IN ('succeeded', 'dead', 'cancelled', 'skipped') THEN r.state
    END AS event
    FROM runs r
    WHERE r.id IN (SELECT value FROM json_each(:ids))
      AND (:tenants IS NULL OR r.tenant IN (SELECT value FROM json_each(:tenants)))
),
m AS (
    SELECT e.*, e.id || ':' || e.token || ':' || e.event AS message_id
    FROM e WHERE e.event IN (SELECT value FROM json_each(:kinds))
)
INSERT INTO outbox (message_id, tenant, run_id, attempt, connection, target, body, headers,
                    created_at, available_at)
SELECT m.message_id, m.tenant, m.id, m.attempt, :connection, json(:target),
       json_object(
           'event', m.event, 'message_id', m.message_id, 'at', (strftime('%Y-%m-%dT%H:%M:%S', :now / 1000000, 'unixepoch') || '.' || printf('%06d', :now % 1000000) || 'Z'),
           'run_id', m.id, 'job_id', m.job_id, 'job', m.job_name, 'tenant', m.tenant,
           'task', m.task, 'queue', m.queue, 'trigger', m.trigger,
           'scheduled_for', (strftime('%Y-%m-%dT%H:%M:%S', m.scheduled_for / 1000000, 'unixepoch') || '.' || printf('%06d', m.scheduled_for % 1000000) || 'Z'), 'attempt', m.attempt,
           'max_attempts', m.max_attempts, 'state', m.state, 'reason', m.reason,
           'error_class', m.last_error_class, 'claimed_at', (strftime('%Y-%m-%dT%H:%M:%S', m.claimed_at / 1000000, 'unixepoch') || '.' || printf('%06d', m.claimed_at % 1000000) || 'Z'),
           'started_at', (strftime('%Y-%m-%dT%H:%M:%S', m.started_at / 1000000, 'unixepoch') || '.' || printf('%06d', m.started_at % 1000000) || 'Z'), 'finished_at', (strftime('%Y-%m-%dT%H:%M:%S', m.finished_at / 1000000, 'unixepoch') || '.' || printf('%06d', m.finished_at % 1000000) || 'Z')
       ),
       json_object(
           'duetime-message-id', m.message_id, 'duetime-event', m.event,
           'duetime-run-id', m.id, 'duetime-job', m.job_name, 'duetime-tenant', m.tenant,
           'duetime-scheduled-for', (strftime('%Y-%m-%dT%H:%M:%S', m.scheduled_for / 1000000, 'unixepoch') || '.' || printf('%06d', m.scheduled_for % 1000000) || 'Z')
       ),
       :now, :now
FROM m
WHERE true
ORDER BY m.id
ON CONFLICT (message_id) DO NOTHING;

-- name: outbox_skip_events
-- `skipped` events of occurrences the scheduler skipped without a run (one per skip range);
-- see the PostgreSQL queries. One JSON array per column, as skips_insert.
WITH s AS (
    SELECT j.value AS job_id, json_extract(:first_at, '$[' || j.key || ']') AS first_at,
           json_extract(:last_at, '$[' || j.key || ']') AS last_at,
           json_extract(:count, '$[' || j.key || ']') AS count,
           json_extract(:reason, '$[' || j.key || ']') AS reason
    FROM json_each(:job_id) AS j
),
m AS (
    SELECT s.*, jobs.name, jobs.tenant,
           'skip:' || s.job_id || ':' || (strftime('%Y-%m-%dT%H:%M:%S', s.first_at / 1000000, 'unixepoch') || '.' || printf('%06d', s.first_at % 1000000) || 'Z') AS message_id
    FROM s JOIN jobs ON jobs.id = s.job_id
    WHERE 'skipped' IN (SELECT value FROM json_each(:kinds))
      AND (:tenants IS NULL OR jobs.tenant IN (SELECT value FROM json_each(:tenants)))
)
INSERT INTO outbox (message_id, tenant, run_id, attempt, connection, target, body, headers,
                    created_at, available_at)
SELECT m.message_id, m.tenant, '00000000-0000-0000-0000-000000000000', 0, :connection,
       json(:target),
       json_object(
           'event', 'skipped', 'message_id', m.message_id, 'at', (strftime('%Y-%m-%dT%H:%M:%S', :now / 1000000, 'unixepoch') || '.' || printf('%06d', :now % 1000000) || 'Z'),
           'run_id', NULL, 'job_id', m.job_id, 'job', m.name, 'tenant', m.tenant,
           'scheduled_for', (strftime('%Y-%m-%dT%H:%M:%S', m.first_at / 1000000, 'unixepoch') || '.' || printf('%06d', m.first_at % 1000000) || 'Z'), 'last', (strftime('%Y-%m-%dT%H:%M:%S', m.last_at / 1000000, 'unixepoch') || '.' || printf('%06d', m.last_at % 1000000) || 'Z'),
           'count', m.count, 'state', 'skipped', 'reason', m.reason, 'attempt', 0
       ),
       json_object(
           'duetime-message-id', m.message_id, 'duetime-event', 'skipped',
           'duetime-job', m.name, 'duetime-tenant', m.tenant,
           'duetime-scheduled-for', (strftime('%Y-%m-%dT%H:%M:%S', m.first_at / 1000000, 'unixepoch') || '.' || printf('%06d', m.first_at % 1000000) || 'Z')
       ),
       :now, :now
FROM m
WHERE true
ON CONFLICT (message_id) DO NOTHING;
