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
