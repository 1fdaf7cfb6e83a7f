-- Long runs (progress, checkpoints, cooperative cancel); every write fenced by (id, token).

-- name: run_progress_set
UPDATE runs SET progress = :fraction, progress_message = :message
WHERE id = :id AND token = :token AND state = 'running';

-- name: run_checkpoint_set
UPDATE runs SET checkpoint = :checkpoint
WHERE id = :id AND token = :token AND state = 'running';

-- name: runs_held
-- Runs a worker holds: after a claim whose answer was lost, it adopts those it does not know.
SELECT * FROM runs WHERE state = 'running' AND lease_owner = :worker_id;

-- name: runs_stop_requested
-- Of the runs given (id, token), those asked to stop, with why: `replaced` (a newer run waits
-- for it) or `cancelled`. Each id's token is read by its position (as in runs_heartbeat).
SELECT id, CASE WHEN replace_deadline IS NULL THEN 'cancelled' ELSE 'replaced' END AS reason
FROM runs
WHERE (id, token) IN (SELECT i.value, json_extract(:tokens, '$[' || i.key || ']')
                      FROM json_each(:ids) AS i)
  AND state = 'running' AND cancel_requested;
