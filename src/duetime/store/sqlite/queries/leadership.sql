-- name: leader_elect
-- Take the leadership if it is free or expired, or renew it if we hold it. The term increases
-- on every change of leader (never on a renewal), so it fences leader-only writes.
INSERT INTO leader (name, node_id, term, elected_at, expires_at)
VALUES ('default', :node_id, 1, :now, :now + CAST(round(:ttl * 1000000) AS INTEGER))
ON CONFLICT (name) DO UPDATE SET
    term = CASE WHEN leader.node_id = excluded.node_id AND leader.expires_at >= :now
                THEN leader.term ELSE leader.term + 1 END,
    elected_at = CASE WHEN leader.node_id = excluded.node_id AND leader.expires_at >= :now
                      THEN leader.elected_at ELSE excluded.elected_at END,
    node_id = excluded.node_id,
    expires_at = excluded.expires_at
WHERE leader.node_id = excluded.node_id OR leader.expires_at < :now
RETURNING node_id, term, elected_at, expires_at;

-- name: leader_resign
-- Expire our term at once so any node takes over at its next attempt (the term is kept).
UPDATE leader SET expires_at = :now
WHERE name = 'default' AND node_id = :node_id AND term = :term;

-- name: leader_get
SELECT node_id, term, elected_at, expires_at FROM leader WHERE name = 'default';

-- name: leader_hold
SELECT 1 AS held FROM leader
WHERE name = 'default' AND node_id = :node_id AND term = :term AND expires_at > :now;

-- name: node_upsert
INSERT INTO nodes (id, host, pid, roles, partitions, started_at, heartbeat_at)
VALUES (:id, :host, :pid, :roles, :partitions, :started_at, :now)
ON CONFLICT (id) DO UPDATE SET
    roles = excluded.roles, partitions = excluded.partitions, heartbeat_at = excluded.heartbeat_at;

-- name: node_heartbeat
UPDATE nodes SET heartbeat_at = :now WHERE id = :id;

-- name: node_delete
DELETE FROM nodes WHERE id = :id;

-- name: nodes_list
SELECT * FROM nodes ORDER BY started_at, id;

-- name: nodes_prune
DELETE FROM nodes WHERE heartbeat_at < :before;

-- name: workers_prune
DELETE FROM workers WHERE heartbeat_at < :before;

-- name: history_prune_runs
-- Up to :limit runs that ended before :before, deleted; returns their ids (the caller
-- deletes their attempts next, in the same transaction). Never a dead letter: a `dead` run
-- stays until it is replayed (then it is no longer dead) or its job is deleted. Seeks in
-- runs_finished (state, finished_at) per prunable state: the dead letters are never read.
DELETE FROM runs WHERE id IN (
    SELECT id FROM runs
    WHERE state IN ('succeeded', 'cancelled', 'skipped')
      AND finished_at IS NOT NULL AND finished_at < :before
      -- a running or failed workflow instance still reads its steps' results
      AND NOT EXISTS (
          SELECT 1 FROM workflow_steps ws JOIN workflow_instances wi ON wi.id = ws.instance_id
          WHERE ws.run_id = runs.id AND wi.state IN ('running', 'failed')
      )
    ORDER BY finished_at
    LIMIT :limit
)
RETURNING id;

-- name: history_prune_attempts
-- The attempts of the runs history_prune_runs just deleted (:ids, a JSON array).
DELETE FROM attempts WHERE run_id IN (SELECT value FROM json_each(:ids));

-- name: history_prune_skips
DELETE FROM run_skips WHERE rowid IN (
    SELECT rowid FROM run_skips WHERE created_at < :before LIMIT :limit
);
