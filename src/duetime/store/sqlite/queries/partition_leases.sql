-- Leased partition ownership (see PostgreSQL's partition_leases.sql). SQLite has one writer:
-- BEGIN IMMEDIATE serializes a takeover with a materializing transaction.

-- name: partition_member_beat
INSERT INTO partition_members (node_id, joined_at, expires_at)
VALUES (:node_id, :now, :now + CAST(round(:ttl * 1000000) AS INTEGER))
ON CONFLICT (node_id) DO UPDATE SET expires_at = excluded.expires_at;

-- name: partition_members_lock
-- (PostgreSQL locks these rows in order; here BEGIN IMMEDIATE already holds the database.)
SELECT node_id FROM partition_members WHERE expires_at <= :now OR node_id = :node_id;

-- name: partition_members_prune
DELETE FROM partition_members WHERE expires_at <= :now;

-- name: partition_members_live
SELECT node_id FROM partition_members WHERE expires_at > :now ORDER BY joined_at, node_id;

-- name: partition_member_leave
DELETE FROM partition_members WHERE node_id = :node_id;

-- name: partition_leases_lock
-- The rows a claim may change (PostgreSQL locks them in order first; see its file).
SELECT partition_key FROM partition_leases
WHERE (owner = :node_id AND expires_at > :now)
   OR (partition_key IN (SELECT value FROM json_each(:want)) AND expires_at <= :now)
ORDER BY partition_key;

-- name: partition_leases_release
UPDATE partition_leases SET expires_at = :now
WHERE owner = :node_id AND expires_at > :now
  AND partition_key NOT IN (SELECT value FROM json_each(:keep))
  AND partition_key IN (SELECT value FROM json_each(:locked));

-- name: partition_leases_renew
UPDATE partition_leases SET expires_at = :now + CAST(round(:ttl * 1000000) AS INTEGER)
WHERE partition_key IN (SELECT value FROM json_each(:want))
  AND owner = :node_id AND expires_at > :now
  AND partition_key IN (SELECT value FROM json_each(:locked))
RETURNING partition_key, owner, epoch, expires_at;

-- name: partition_leases_take
UPDATE partition_leases SET
    owner = :node_id,
    epoch = epoch + 1,
    expires_at = :now + CAST(round(:ttl * 1000000) AS INTEGER)
WHERE partition_key IN (SELECT value FROM json_each(:want)) AND expires_at <= :now
  AND partition_key IN (SELECT value FROM json_each(:locked))
RETURNING partition_key, owner, epoch, expires_at;

-- name: partition_leases_insert
-- (`WHERE true`: SQLite's upsert after a SELECT needs it to parse.)
INSERT INTO partition_leases (partition_key, owner, epoch, expires_at)
SELECT value, :node_id, 1, :now + CAST(round(:ttl * 1000000) AS INTEGER)
FROM json_each(:want) WHERE true
ON CONFLICT (partition_key) DO NOTHING
RETURNING partition_key, owner, epoch, expires_at;

-- name: partition_leases_list
SELECT partition_key, owner, epoch, expires_at FROM partition_leases ORDER BY partition_key;

-- name: jobs_due_leased
SELECT * FROM jobs
WHERE status = 'active' AND next_fire_at IS NOT NULL AND next_fire_at <= :until
  AND partition_key BETWEEN :partition_low AND :partition_high
  AND partition_key IN (
      SELECT partition_key FROM partition_leases WHERE owner = :owner AND expires_at > :now
  )
ORDER BY next_fire_at
LIMIT :limit;
