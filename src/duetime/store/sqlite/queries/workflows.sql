-- Workflows (see PostgreSQL's queries/workflows.sql). SQLite writes one transaction at a
-- time: an instance's rows are changed by one writer without a row lock.

-- name: workflow_insert
INSERT INTO workflows (tenant, name, version, digest, definition, created_at)
SELECT :tenant, :name, coalesce(max(version), 0) + 1, :digest, :definition, :now
FROM workflows WHERE tenant = :tenant AND name = :name
RETURNING *;

-- name: workflow_version
SELECT * FROM workflows WHERE tenant = :tenant AND name = :name AND version = :version;

-- name: workflow_latest
SELECT * FROM workflows WHERE tenant = :tenant AND name = :name
ORDER BY version DESC LIMIT 1;

-- name: workflow_versions
SELECT version FROM workflows WHERE tenant = :tenant AND name = :name ORDER BY version;

-- name: workflows_latest
SELECT w.* FROM workflows w
WHERE w.tenant = :tenant
  AND w.version = (SELECT max(x.version) FROM workflows x
                   WHERE x.tenant = w.tenant AND x.name = w.name)
ORDER BY w.name;

-- name: workflow_start_runs
SELECT r.id, r.tenant, r.job_id, r.payload, r.state, j.target
FROM runs r JOIN jobs j ON j.id = r.job_id
WHERE r.id IN (SELECT value FROM json_each(:ids));

-- name: workflow_instance_insert
INSERT INTO workflow_instances (
    id, tenant, workflow, version, job_id, start_run_id, state, input, reason, created_at,
    finished_at
)
VALUES (:id, :tenant, :workflow, :version, :job_id, :start_run_id, :state, :input, :reason,
        :now, CASE WHEN :state = 'running' THEN NULL ELSE :now END)
ON CONFLICT (start_run_id) DO NOTHING
RETURNING id;

-- name: workflow_instance_lock
SELECT * FROM workflow_instances WHERE id = :id;

-- name: workflow_instance_get
SELECT * FROM workflow_instances WHERE tenant = :tenant AND id = :id;

-- name: workflow_instances_list
SELECT * FROM workflow_instances
WHERE tenant = :tenant
  AND (:workflow IS NULL OR workflow = :workflow)
  AND (:state IS NULL OR state = :state)
  AND (:job_id IS NULL OR job_id = :job_id)
ORDER BY created_at DESC, id DESC
LIMIT :limit;

-- name: workflow_instance_finish
UPDATE workflow_instances SET state = :state, reason = :reason, finished_at = :now
WHERE id = :id AND state = 'running';

-- name: workflow_instance_reopen
UPDATE workflow_instances SET state = 'running', reason = NULL, finished_at = NULL
WHERE id = :id;

-- name: workflow_steps_of
SELECT s.step, s.map_index, s.state, s.run_id, s.reason, s.updated_at, s.items,
       s.items_ended, s.items_failed,
       r.state AS run_state, r.reason AS run_reason, r.last_error_message AS run_error,
       r.result
FROM workflow_steps s LEFT JOIN runs r ON r.id = s.run_id
WHERE s.instance_id = :id
ORDER BY s.step, s.map_index;

-- name: workflow_steps_states
-- An instance's rows without results (cancel, retry, explain: no item's result is read).
SELECT step, map_index, state, run_id, reason, updated_at, items, items_ended, items_failed
FROM workflow_steps WHERE instance_id = :id
ORDER BY step, map_index;

-- name: workflow_items_of
-- A mapped step's items with their runs' states (a step expanded before, started again).
SELECT s.map_index, s.run_id, r.state AS run_state
FROM workflow_steps s LEFT JOIN runs r ON r.id = s.run_id
WHERE s.instance_id = :id AND s.step = :step AND s.map_index >= 0
ORDER BY s.map_index;

-- name: workflow_steps_insert
INSERT INTO workflow_steps (
    instance_id, step, map_index, state, run_id, reason, items, items_ended, items_failed,
    updated_at
)
SELECT :id, json_extract(b.value, '$.step'), json_extract(b.value, '$.map_index'),
       json_extract(b.value, '$.state'), json_extract(b.value, '$.run_id'),
       json_extract(b.value, '$.reason'), json_extract(b.value, '$.items'),
       coalesce(json_extract(b.value, '$.items_ended'), 0),
       coalesce(json_extract(b.value, '$.items_failed'), 0), :now
FROM json_each(:batch) AS b
WHERE true
ON CONFLICT DO NOTHING;

-- name: workflow_steps_set
UPDATE workflow_steps SET
    state = json_extract(b.value, '$.state'), reason = json_extract(b.value, '$.reason'),
    run_id = coalesce(json_extract(b.value, '$.run_id'), run_id),
    items = coalesce(json_extract(b.value, '$.items'), items),
    items_ended = coalesce(json_extract(b.value, '$.items_ended'), items_ended),
    items_failed = coalesce(json_extract(b.value, '$.items_failed'), items_failed),
    updated_at = :now
FROM json_each(:batch) AS b
WHERE workflow_steps.instance_id = :id
  AND workflow_steps.step = json_extract(b.value, '$.step')
  AND workflow_steps.map_index = json_extract(b.value, '$.map_index');

-- name: workflow_instances_of_runs
SELECT DISTINCT instance_id FROM workflow_steps
WHERE run_id IN (SELECT value FROM json_each(:ids)) AND state = 'running';

-- name: workflow_instances_to_sweep
SELECT DISTINCT s.instance_id FROM workflow_steps s LEFT JOIN runs r ON r.id = s.run_id
WHERE s.state = 'running' AND s.run_id IS NOT NULL
  AND (r.id IS NULL OR r.state IN ('succeeded', 'dead', 'cancelled', 'skipped'))
LIMIT :limit;

-- name: workflow_instances_of_cancelled_jobs
-- Running instances whose workflow job was cancelled (their steps can never start).
SELECT i.id FROM workflow_instances i JOIN jobs j ON j.id = i.job_id
WHERE i.state = 'running' AND j.status = 'cancelled'
ORDER BY i.id
LIMIT :limit;

-- name: workflow_steps_of_runs
-- Which of `ids` are runs of workflow steps (and of which instance and step).
SELECT run_id, instance_id, step FROM workflow_steps WHERE run_id IN (SELECT value FROM json_each(:ids));

-- name: workflow_step_of_run
SELECT s.instance_id, s.step, s.map_index, i.workflow, i.version, i.tenant, i.input
FROM workflow_steps s JOIN workflow_instances i ON i.id = s.instance_id
WHERE s.run_id = :run_id;

-- name: workflow_results_of
SELECT s.step, s.map_index, r.result
FROM workflow_steps s JOIN runs r ON r.id = s.run_id
WHERE s.instance_id = :id AND s.step IN (SELECT value FROM json_each(:steps))
ORDER BY s.step, s.map_index;

-- name: workflow_runs_lock
SELECT * FROM runs WHERE id IN (SELECT value FROM json_each(:ids)) ORDER BY id;

-- name: workflow_runs_open
-- Of an instance's step runs, those running (their attempts are recorded `cancelled`).
SELECT * FROM runs WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'running';

-- name: workflow_runs_stop
UPDATE runs SET
    state = 'cancelled', token = token + 1, reason = 'workflow cancelled',
    finished_at = :now, lease_owner = NULL, lease_expires_at = NULL,
    cancel_requested = (state = 'running')
WHERE id IN (SELECT value FROM json_each(:ids)) AND state IN ('scheduled', 'running')
RETURNING *;

-- name: workflow_run_replay
UPDATE runs SET
    state = 'scheduled', available_at = :now, finished_at = NULL, reason = NULL,
    replays = replays + 1, retry_from = :now, result = NULL, cancel_requested = 0,
    max_attempts = attempt + :budget
WHERE id = :id AND state IN ('dead', 'cancelled', 'skipped')
RETURNING id;

-- name: workflow_instances_prune
-- Instances that succeeded or were cancelled before `before` (with their steps), oldest
-- first; failed ones stay, as their dead-letter runs do, for a retry from failure.
DELETE FROM workflow_instances WHERE id IN (
    SELECT id FROM workflow_instances
    WHERE state IN ('succeeded', 'cancelled') AND finished_at < :before
    ORDER BY finished_at
    LIMIT :limit
);

-- name: workflow_steps_whole
-- Each step's own row of an instance (a mapped step's counts its items): what planning reads.
SELECT step, state, run_id, items, items_ended, items_failed FROM workflow_steps
WHERE instance_id = :id AND map_index = -1;

-- name: workflow_steps_ended
-- Of an instance's running steps and items, those whose run is one of `ids` and has ended.
SELECT s.step, s.map_index, r.state AS run_state, r.last_error_message AS run_error
FROM workflow_steps s JOIN runs r ON r.id = s.run_id
WHERE s.instance_id = :id AND s.state = 'running' AND s.run_id IN (SELECT value FROM json_each(:ids))
  AND r.state IN ('succeeded', 'dead', 'cancelled', 'skipped');

-- name: workflow_steps_swept
-- Of an instance's running steps and items, those whose run has ended or is gone.
SELECT s.step, s.map_index, r.state AS run_state, r.last_error_message AS run_error
FROM workflow_steps s LEFT JOIN runs r ON r.id = s.run_id
WHERE s.instance_id = :id AND s.state = 'running' AND s.run_id IS NOT NULL
  AND (r.id IS NULL OR r.state IN ('succeeded', 'dead', 'cancelled', 'skipped'));

-- name: workflow_step_runs
-- An instance's rows with their runs' timings and results, one query however wide a
-- fan-out (the REST instance view).
SELECT s.step, s.map_index, s.state, s.run_id, s.reason, s.updated_at,
       r.state AS run_state, r.result, r.attempt, r.created_at AS run_created_at,
       r.started_at, r.finished_at
FROM workflow_steps s LEFT JOIN runs r ON r.id = s.run_id
WHERE s.instance_id = :id
ORDER BY s.step, s.map_index;
