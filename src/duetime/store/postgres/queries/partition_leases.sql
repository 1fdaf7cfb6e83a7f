-- Leased partition ownership (store/_sql_partitions.py, docs/decisions/0028). Every
-- statement is given the transaction's instant %(now)s (read once).

-- name: partition_member_beat
-- Join, or stay a member, until now + ttl (joined_at is kept across renewals).
INSERT INTO partition_members (node_id, joined_at, expires_at)
VALUES (%(node_id)s, %(now)s, %(now)s::timestamptz + make_interval(secs => %(ttl)s))
ON CONFLICT (node_id) DO UPDATE SET expires_at = excluded.expires_at;

-- name: partition_members_lock
-- First in a beat: the expired members and our own row, locked in node_id order, so two
-- beats whose instants differ never lock them in opposite orders (a deadlock).
SELECT node_id FROM partition_members
WHERE expires_at <= %(now)s OR node_id = %(node_id)s
ORDER BY node_id
FOR UPDATE;

-- name: partition_members_prune
DELETE FROM partition_members WHERE expires_at <= %(now)s;

-- name: partition_members_live
SELECT node_id FROM partition_members WHERE expires_at > %(now)s ORDER BY joined_at, node_id;

-- name: partition_member_leave
DELETE FROM partition_members WHERE node_id = %(node_id)s;

-- name: partition_leases_lock
-- First in a claim or a leave: every lease row it may change (ours unexpired, and the lapsed
-- ones of %(want)s), locked in partition order in one statement. The statements after it
-- change only the rows it locked (passed as locked), so two claims, whatever members or
-- instant each sees, take their row locks in the same order and cannot deadlock.
-- FOR NO KEY UPDATE, like the renewal: it does not wait for our own materializing
-- transaction (FOR KEY SHARE).
SELECT partition_key FROM partition_leases
WHERE (owner = %(node_id)s AND expires_at > %(now)s)
   OR (partition_key = ANY(%(want)s::smallint[]) AND expires_at <= %(now)s)
ORDER BY partition_key
FOR NO KEY UPDATE;

-- name: partition_leases_release
-- Give up our unexpired leases but those of %(keep)s: they expire now (owner and epoch kept).
-- A no-key update: it does not wait for our own materializing transaction (whose FOR KEY
-- SHARE lock makes the next owner's partition_leases_take wait instead).
UPDATE partition_leases SET expires_at = %(now)s
WHERE owner = %(node_id)s AND expires_at > %(now)s
  AND NOT (partition_key = ANY(%(keep)s::smallint[]))
  AND partition_key = ANY(%(locked)s::smallint[]);

-- name: partition_leases_renew
-- Extend our unexpired leases of %(want)s (the epoch stays). A no-key update: it never waits
-- for our own materializing transaction, however long a batch takes.
UPDATE partition_leases SET expires_at = %(now)s::timestamptz + make_interval(secs => %(ttl)s)
WHERE partition_key = ANY(%(want)s::smallint[])
  AND owner = %(node_id)s AND expires_at > %(now)s
  AND partition_key = ANY(%(locked)s::smallint[])
RETURNING partition_key, owner, epoch, expires_at;

-- name: partition_leases_take
-- Take the expired (or released) leases of %(want)s, with the next epoch: the fencing token.
-- FOR UPDATE waits for a materializing transaction of the previous owner still holding the
-- lease row (FOR KEY SHARE in jobs_due_leased), so the new owner reads what it committed; a
-- lease renewed meanwhile no longer matches and is left alone. Only rows partition_leases_lock
-- locked (one released since is taken at the next renewal), in key order.
WITH lapsed AS (
    SELECT partition_key FROM partition_leases
    WHERE partition_key = ANY(%(want)s::smallint[]) AND expires_at <= %(now)s
      AND partition_key = ANY(%(locked)s::smallint[])
    ORDER BY partition_key
    FOR UPDATE
)
UPDATE partition_leases l SET
    owner = %(node_id)s,
    epoch = l.epoch + 1,
    expires_at = %(now)s::timestamptz + make_interval(secs => %(ttl)s)
FROM lapsed WHERE l.partition_key = lapsed.partition_key
RETURNING l.partition_key, l.owner, l.epoch, l.expires_at;

-- name: partition_leases_insert
-- The leases of %(want)s never taken before: their first epoch (a concurrent insert wins).
INSERT INTO partition_leases (partition_key, owner, epoch, expires_at)
SELECT k, %(node_id)s, 1, %(now)s::timestamptz + make_interval(secs => %(ttl)s)
FROM unnest(%(want)s::smallint[]) AS k
ORDER BY k
ON CONFLICT (partition_key) DO NOTHING
RETURNING partition_key, owner, epoch, expires_at;

-- name: partition_leases_list
SELECT partition_key, owner, epoch, expires_at FROM partition_leases ORDER BY partition_key;

-- name: jobs_due_leased
-- jobs_due for a node serving leased partitions: only those whose lease it holds unexpired
-- at %(now)s. The lease rows are locked FOR KEY SHARE until the materializing transaction
-- ends: a takeover (partition_leases_take, FOR UPDATE) waits for it, our own renewal does not.
-- A node that lost a lease never materializes that partition again. The held partitions are
-- an array computed once (an InitPlan): as `IN (…)` the planner joined them to a sequential
-- scan and sorted; this way the scan stays a range of jobs_due (next_fire_at) that stops at
-- the limit, the partitions a filter, as in jobs_due. The lease rows are locked in key order,
-- the order a takeover locks them in (else the two could deadlock).
SELECT * FROM jobs
WHERE status = 'active' AND next_fire_at IS NOT NULL AND next_fire_at <= %(until)s
  AND partition_key BETWEEN %(partition_low)s AND %(partition_high)s
  AND partition_key = ANY(ARRAY(
      SELECT l.partition_key FROM partition_leases l
      WHERE l.owner = %(owner)s AND l.expires_at > %(now)s
      ORDER BY l.partition_key
      FOR KEY SHARE
  ))
ORDER BY next_fire_at
LIMIT %(limit)s
FOR UPDATE OF jobs SKIP LOCKED;
