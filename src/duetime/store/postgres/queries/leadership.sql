-- name: leader_elect
-- Take the leadership if it is free or expired, or renew it if we hold it. The term increases
-- on every change of leader (never on a renewal), so it fences leader-only writes. A takeover
-- first locks the lapsed row FOR UPDATE: it waits for a leader-only transaction still in
-- flight (leader_hold's FOR KEY SHARE); the leader's own renewal, a no-key update, never does.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now),
lapsed AS (
    SELECT 1 FROM leader, t
    WHERE name = 'default' AND node_id <> %(node_id)s AND expires_at < t.now
    FOR UPDATE OF leader
)
INSERT INTO leader AS l (name, node_id, term, elected_at, expires_at)
SELECT 'default', %(node_id)s, 1, t.now, t.now + make_interval(secs => %(ttl)s) FROM t
WHERE (SELECT count(*) FROM lapsed) >= 0
ON CONFLICT (name) DO UPDATE SET
    term = CASE WHEN l.node_id = excluded.node_id AND l.expires_at >= excluded.elected_at
                THEN l.term ELSE l.term + 1 END,
    elected_at = CASE WHEN l.node_id = excluded.node_id AND l.expires_at >= excluded.elected_at
                      THEN l.elected_at ELSE excluded.elected_at END,
    node_id = excluded.node_id,
    expires_at = excluded.expires_at
WHERE l.node_id = excluded.node_id OR l.expires_at < excluded.elected_at
RETURNING node_id, term, elected_at, expires_at;

-- name: leader_resign
UPDATE leader SET expires_at = coalesce(%(now)s::timestamptz, clock_timestamp())
WHERE name = 'default' AND node_id = %(node_id)s AND term = %(term)s;

-- name: leader_get
SELECT node_id, term, elected_at, expires_at FROM leader WHERE name = 'default';

-- name: leader_hold
-- Inside a leader-only transaction: lock the leader row (a takeover waits for us; our own
-- renewal does not: FOR KEY SHARE) and check that we still hold an unexpired term.
SELECT 1 AS held FROM leader
WHERE name = 'default' AND node_id = %(node_id)s AND term = %(term)s
  AND expires_at > coalesce(%(now)s::timestamptz, clock_timestamp())
FOR KEY SHARE;

-- name: node_upsert
INSERT INTO nodes (id, host, pid, roles, partitions, started_at, heartbeat_at)
VALUES (%(id)s, %(host)s, %(pid)s, %(roles)s::jsonb, %(partitions)s, %(started_at)s,
        coalesce(%(now)s::timestamptz, clock_timestamp()))
ON CONFLICT (id) DO UPDATE SET
    roles = excluded.roles, partitions = excluded.partitions, heartbeat_at = excluded.heartbeat_at;

-- name: node_heartbeat
UPDATE nodes SET heartbeat_at = coalesce(%(now)s::timestamptz, clock_timestamp())
WHERE id = %(id)s;

-- name: node_delete
DELETE FROM nodes WHERE id = %(id)s;

-- name: nodes_list
SELECT * FROM nodes ORDER BY started_at, id;

-- name: nodes_prune
DELETE FROM nodes WHERE heartbeat_at < %(before)s;

-- name: workers_prune
DELETE FROM workers WHERE heartbeat_at < %(before)s;

-- name: history_prune_runs
-- Up to %(limit)s runs that ended before %(before)s, oldest first per state, deleted; returns
-- their ids (the caller deletes their attempts next, in the same transaction). Never a dead
-- letter: a `dead` run stays until it is replayed (then it is no longer dead) or its job is
-- deleted. One range of runs_finished (state, finished_at) per prunable state: the dead
-- letters kept below the cut are never read. A run locked by another transaction (a
-- completion recording a refused attempt for it) is skipped until a later pass. The pick is
-- a materialized CTE: inside `IN (…)` a LIMIT … SKIP LOCKED subquery may be run more than
-- once by the plan and so delete more than %(limit)s runs.
WITH picked AS MATERIALIZED (
    SELECT r.id FROM unnest(ARRAY['succeeded', 'cancelled', 'skipped']) AS s(state)
    CROSS JOIN LATERAL (
        SELECT runs.id, runs.finished_at FROM runs
        WHERE runs.state = s.state AND runs.finished_at IS NOT NULL
          AND runs.finished_at < %(before)s
          -- a running or failed workflow instance still reads its steps' results
          AND NOT EXISTS (
              SELECT 1 FROM workflow_steps ws JOIN workflow_instances wi ON wi.id = ws.instance_id
              WHERE ws.run_id = runs.id AND wi.state IN ('running', 'failed')
          )
        ORDER BY runs.finished_at
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) r
    ORDER BY r.finished_at
    LIMIT %(limit)s
)
DELETE FROM runs USING picked WHERE runs.id = picked.id
RETURNING runs.id;

-- name: history_prune_attempts
-- Attempts are dropped a week at a time with their partition (attempts_partitions); what is
-- pruned row by row is the default partition's share of the runs history_prune_runs just
-- deleted (%(ids)s), through its primary key (run_id first). The attempts it keeps for live
-- runs and dead letters are never read again: they go when their run does.
DELETE FROM attempts_default WHERE run_id = ANY(%(ids)s::uuid[]);

-- name: history_prune_skips
DELETE FROM run_skips WHERE ctid IN (
    SELECT ctid FROM run_skips WHERE created_at < %(before)s LIMIT %(limit)s
);
