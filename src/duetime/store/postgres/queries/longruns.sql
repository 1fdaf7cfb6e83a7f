-- Long runs (progress, checkpoints, cooperative cancel); every write fenced by (id, token).

-- name: run_progress_set
UPDATE runs SET progress = %(fraction)s, progress_message = %(message)s
WHERE id = %(id)s AND token = %(token)s AND state = 'running'
RETURNING id;

-- name: run_checkpoint_set
UPDATE runs SET checkpoint = %(checkpoint)s::json
WHERE id = %(id)s AND token = %(token)s AND state = 'running'
RETURNING id;

-- name: runs_held
-- Runs a worker holds: after a claim whose answer was lost, it adopts those it does not know.
SELECT * FROM runs WHERE state = 'running' AND lease_owner = %(worker_id)s;

-- name: runs_stop_requested
-- Of the runs given (id, token), those asked to stop, with why: `replaced` (a newer run waits
-- for it) or `cancelled`.
SELECT r.id, CASE WHEN r.replace_deadline IS NULL THEN 'cancelled' ELSE 'replaced' END AS reason
FROM runs r
JOIN unnest(%(ids)s::uuid[], %(tokens)s::bigint[]) AS i(id, token)
  ON r.id = i.id AND r.token = i.token
WHERE r.state = 'running' AND r.cancel_requested;
