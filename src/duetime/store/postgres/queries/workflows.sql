-- Workflows (docs/workflows.md): versions by content, instances, and one row per step (and
-- per item of a mapped step). An instance's rows change only while its row is locked
-- (workflow_instance_lock), so two workers ending two of its steps plan one after the other.
-- The statements that read an instance's rows are planned per execution: a generic plan made
-- while the table held a few rows loops sequential scans over a fan-out's 10,000 later.

-- name: workflow_insert
-- The next version of a workflow (the caller holds the (tenant, name) lock).
INSERT INTO workflows (tenant, name, version, digest, definition, created_at)
SELECT %(tenant)s, %(name)s, coalesce(max(version), 0) + 1, %(digest)s, %(definition)s::json,
       %(now)s
FROM workflows WHERE tenant = %(tenant)s AND name = %(name)s
RETURNING *;

-- name: workflow_version
SELECT * FROM workflows WHERE tenant = %(tenant)s AND name = %(name)s AND version = %(version)s;

-- name: workflow_latest
SELECT * FROM workflows WHERE tenant = %(tenant)s AND name = %(name)s
ORDER BY version DESC LIMIT 1;

-- name: workflow_versions
SELECT version FROM workflows WHERE tenant = %(tenant)s AND name = %(name)s ORDER BY version;

-- name: workflows_latest
SELECT DISTINCT ON (name) * FROM workflows WHERE tenant = %(tenant)s
ORDER BY name, version DESC;

-- name: workflow_start_runs
-- The start runs just ended, with their job's workflow name.
SELECT r.id, r.tenant, r.job_id, r.payload, r.state, j.target
FROM runs r JOIN jobs j ON j.id = r.job_id
WHERE r.id = ANY(%(ids)s::uuid[]);

-- name: workflow_instance_insert
INSERT INTO workflow_instances (
    id, tenant, workflow, version, job_id, start_run_id, state, input, reason, created_at,
    finished_at
)
VALUES (%(id)s, %(tenant)s, %(workflow)s, %(version)s, %(job_id)s, %(start_run_id)s, %(state)s,
        %(input)s::json, %(reason)s, %(now)s,
        CASE WHEN %(state)s = 'running' THEN NULL ELSE %(now)s::timestamptz END)
ON CONFLICT (start_run_id) DO NOTHING
RETURNING id;

-- name: workflow_instance_lock
SELECT * FROM workflow_instances WHERE id = %(id)s FOR UPDATE;

-- name: workflow_instance_get
SELECT * FROM workflow_instances WHERE tenant = %(tenant)s AND id = %(id)s;

-- name: workflow_instances_list
SELECT * FROM workflow_instances
WHERE tenant = %(tenant)s
  AND (%(workflow)s::text IS NULL OR workflow = %(workflow)s::text)
  AND (%(state)s::text IS NULL OR state = %(state)s::text)
  AND (%(job_id)s::uuid IS NULL OR job_id = %(job_id)s::uuid)
ORDER BY created_at DESC, id DESC
LIMIT %(limit)s;

-- name: workflow_instance_finish
UPDATE workflow_instances SET state = %(state)s, reason = %(reason)s, finished_at = %(now)s
WHERE id = %(id)s AND state = 'running';

-- name: workflow_instance_reopen
UPDATE workflow_instances SET state = 'running', reason = NULL, finished_at = NULL
WHERE id = %(id)s;

-- name: workflow_steps_of
-- An instance's rows with their runs' states (a run gone: run_state NULL).
SELECT s.step, s.map_index, s.state, s.run_id, s.reason, s.updated_at, s.items,
       s.items_ended, s.items_failed,
       r.state AS run_state, r.reason AS run_reason, r.last_error_message AS run_error,
       r.result
FROM workflow_steps s LEFT JOIN runs r ON r.id = s.run_id
WHERE s.instance_id = %(id)s
ORDER BY s.step, s.map_index;

-- name: workflow_steps_states
-- An instance's rows without results (cancel, retry, explain: no item's result is read).
SELECT step, map_index, state, run_id, reason, updated_at, items, items_ended, items_failed
FROM workflow_steps WHERE instance_id = %(id)s
ORDER BY step, map_index;

-- name: workflow_items_of
-- planned per execution (see the top of this file)
-- A mapped step's items with their runs' states (a step expanded before, started again).
SELECT s.map_index, s.run_id, r.state AS run_state
FROM workflow_steps s LEFT JOIN runs r ON r.id = s.run_id
WHERE s.instance_id = %(id)s AND s.step = %(step)s AND s.map_index >= 0
ORDER BY s.map_index;

-- name: workflow_steps_insert
INSERT INTO workflow_steps (
    instance_id, step, map_index, state, run_id, reason, items, items_ended, items_failed,
    updated_at
)
SELECT %(id)s, i.step, i.map_index, i.state, i.run_id, i.reason, i.items,
       coalesce(i.items_ended, 0), coalesce(i.items_failed, 0), %(now)s
FROM jsonb_to_recordset(%(batch)s::jsonb) AS i(
    step text, map_index int, state text, run_id uuid, reason text, items int,
    items_ended int, items_failed int
)
ON CONFLICT DO NOTHING;

-- name: workflow_items_insert
-- A mapped step's expansion in one statement: a run per element of `items` (the source's
-- list, sent once as it is: each element's text becomes its run's payload unchanged) with
-- the columns of `template` (a one-record batch: the step's run as runs_insert takes it;
-- keep the two column lists alike), keyed wf:<instance>:<step>:<index>, and the items'
-- rows. Per item only the element travels, not a whole run record: a 10,000-way fan-out's
-- expansion was a 7 MB batch for runs_insert, parsed under the instance's lock.
WITH t AS (
    SELECT * FROM jsonb_to_recordset(%(template)s::jsonb) AS t(
        job_id uuid, partition_key smallint, tenant text, job_name text, task text,
        queue text, scheduled_for timestamptz, available_at timestamptz, priority int,
        max_attempts int, backoff_base float8, backoff_factor float8, backoff_cap float8,
        timeout_s float8, delivery text, one_shot bool, trigger text, request_hash text,
        target text, concurrency_key text, misfire_at timestamptz, retry_rules text,
        origin text
    )
),
i AS MATERIALIZED (
    SELECT gen_random_uuid() AS id, e.value AS payload, (e.n - 1)::int AS map_index
    FROM json_array_elements(%(items)s::json) WITH ORDINALITY AS e(value, n)
),
r AS (
    INSERT INTO runs (
        id, job_id, tenant, job_name, task, queue, payload, scheduled_for, available_at,
        state, priority, max_attempts, backoff_base, backoff_factor, backoff_cap, timeout_s,
        delivery, one_shot, trigger, idempotency_key, request_hash, created_at, target,
        concurrency_key, misfire_at, retry_rules, origin, partition_key
    )
    SELECT i.id, t.job_id, t.tenant, t.job_name, t.task, t.queue, i.payload, t.scheduled_for,
           t.available_at, 'scheduled', t.priority, t.max_attempts, t.backoff_base,
           t.backoff_factor, t.backoff_cap, t.timeout_s, t.delivery, t.one_shot, t.trigger,
           'wf:' || %(id)s::text || ':' || %(step)s::text || ':' || i.map_index,
           t.request_hash, %(now)s, t.target::json, t.concurrency_key, t.misfire_at,
           t.retry_rules::json, t.origin, t.partition_key
    FROM i CROSS JOIN t
    ON CONFLICT DO NOTHING
)
INSERT INTO workflow_steps (
    instance_id, step, map_index, state, run_id, reason, items, items_ended, items_failed,
    updated_at
)
SELECT %(id)s, %(step)s, i.map_index, 'running', i.id, NULL, NULL, 0, 0, %(now)s
FROM i
ON CONFLICT DO NOTHING;

-- name: workflow_steps_set
-- planned per execution (see the top of this file)
-- Each row of `batch` found through the primary key (the lateral subquery's LIMIT keeps the
-- planner from hashing all of a wide fan-out's 10,000 rows to update a batch's few hundred,
-- under the instance's lock), then updated by its ctid: its rows change only under that
-- lock, so the ctid read is the row's current one.
UPDATE workflow_steps s SET state = i.state, reason = i.reason,
    run_id = coalesce(i.run_id, s.run_id), items = coalesce(i.items, s.items),
    items_ended = coalesce(i.items_ended, s.items_ended),
    items_failed = coalesce(i.items_failed, s.items_failed), updated_at = %(now)s
FROM (
    SELECT i.*, w.tid
    FROM jsonb_to_recordset(%(batch)s::jsonb) AS i(
        step text, map_index int, state text, run_id uuid, reason text, items int,
        items_ended int, items_failed int
    )
    CROSS JOIN LATERAL (
        SELECT ctid AS tid FROM workflow_steps
        WHERE instance_id = %(id)s AND step = i.step AND map_index = i.map_index
        LIMIT 1
    ) w
) i
WHERE s.ctid = i.tid;

-- name: workflow_instances_of_runs
-- planned per execution (see the top of this file)
SELECT DISTINCT instance_id FROM workflow_steps
WHERE run_id = ANY(%(ids)s::uuid[]) AND state = 'running';

-- name: workflow_instances_to_sweep
-- Instances with a step still `running` whose run has ended (or is gone): the transaction
-- that ended it did not plan the instance (the reaper, an operator, a crash before a
-- worker's completion was written and then a takeover).
SELECT DISTINCT s.instance_id FROM workflow_steps s LEFT JOIN runs r ON r.id = s.run_id
WHERE s.state = 'running' AND s.run_id IS NOT NULL
  AND (r.id IS NULL OR r.state IN ('succeeded', 'dead', 'cancelled', 'skipped'))
LIMIT %(limit)s;

-- name: workflow_instances_of_cancelled_jobs
-- Running instances whose workflow job was cancelled (their steps can never start).
SELECT i.id FROM workflow_instances i JOIN jobs j ON j.id = i.job_id
WHERE i.state = 'running' AND j.status = 'cancelled'
ORDER BY i.id
LIMIT %(limit)s;

-- name: workflow_steps_of_runs
-- Which of `ids` are runs of workflow steps (and of which instance and step).
SELECT run_id, instance_id, step FROM workflow_steps WHERE run_id = ANY(%(ids)s::uuid[]);

-- name: workflow_step_of_run
-- planned per execution (see the top of this file)
SELECT s.instance_id, s.step, s.map_index, i.workflow, i.version, i.tenant, i.input
FROM workflow_steps s JOIN workflow_instances i ON i.id = s.instance_id
WHERE s.run_id = %(run_id)s;

-- name: workflow_results_of
-- planned per execution (see the top of this file)
-- The results of an instance's steps named in `steps` (each unmapped step's run, each
-- item's run in item order).
SELECT s.step, s.map_index, r.result
FROM workflow_steps s JOIN runs r ON r.id = s.run_id
WHERE s.instance_id = %(id)s AND s.step = ANY(%(steps)s::text[])
ORDER BY s.step, s.map_index;

-- name: workflow_runs_lock
-- An instance's step runs, locked in id order before the instance is (the order a
-- completion takes: its run, then the instance).
SELECT * FROM runs WHERE id = ANY(%(ids)s::uuid[]) ORDER BY id FOR UPDATE;

-- name: workflow_runs_open
-- Of an instance's step runs, those running (their attempts are recorded `cancelled`).
SELECT * FROM runs WHERE id = ANY(%(ids)s::uuid[]) AND state = 'running' FOR UPDATE;

-- name: workflow_runs_stop
-- An instance's unfinished step runs, cancelled: a run not yet started ends at once; a
-- running one ends `cancelled` and its worker is told (cancel_requested), as run_cancel.
UPDATE runs SET
    state = 'cancelled', token = token + 1, reason = 'workflow cancelled',
    finished_at = %(now)s, lease_owner = NULL, lease_expires_at = NULL,
    cancel_requested = (state = 'running')
WHERE id = ANY(%(ids)s::uuid[]) AND state IN ('scheduled', 'running')
RETURNING *;

-- name: workflow_run_replay
-- A failed step's run back to `scheduled` with a fresh attempt budget (as a dead-letter
-- replay); a run that ended without a run of its handler (cancelled, skipped) too.
UPDATE runs SET
    state = 'scheduled', available_at = %(now)s, finished_at = NULL, reason = NULL,
    replays = replays + 1, retry_from = %(now)s, result = NULL, cancel_requested = false,
    max_attempts = attempt + %(budget)s
WHERE id = %(id)s AND state IN ('dead', 'cancelled', 'skipped')
RETURNING id;

-- name: workflow_instances_prune
-- Instances that succeeded or were cancelled before `before` (with their steps), oldest
-- first; failed ones stay, as their dead-letter runs do, for a retry from failure.
DELETE FROM workflow_instances WHERE id IN (
    SELECT id FROM workflow_instances
    WHERE state IN ('succeeded', 'cancelled') AND finished_at < %(before)s
    ORDER BY finished_at
    LIMIT %(limit)s
);

-- name: workflow_steps_whole
-- planned per execution (see the top of this file)
-- Each step's own row of an instance (a mapped step's counts its items): what planning reads.
SELECT step, state, run_id, items, items_ended, items_failed FROM workflow_steps
WHERE instance_id = %(id)s AND map_index = -1;

-- name: workflow_steps_ended
-- planned per execution (see the top of this file)
-- Of an instance's running steps and items, those whose run is one of `ids` and has ended.
-- Each found from its run id through the unique run_id index (a batch's few hundred runs),
-- never from the instance's rows: a wide fan-out's 10,000 items filtered by `run_id =
-- ANY(ids)`, or joined with `ids` the other way round (a generic plan, fresh statistics
-- saying the instance has a few rows), cost tens of ms to seconds under the instance's lock.
-- The lateral subquery's LIMIT keeps the planner from turning the lookup around.
SELECT s.step, s.map_index, r.state AS run_state, r.last_error_message AS run_error
FROM unnest(%(ids)s::uuid[]) AS e(id)
CROSS JOIN LATERAL (
    SELECT instance_id, step, map_index, state, run_id FROM workflow_steps WHERE run_id = e.id
    LIMIT 1
) s
JOIN runs r ON r.id = s.run_id
WHERE s.instance_id = %(id)s AND s.state = 'running'
  AND r.state IN ('succeeded', 'dead', 'cancelled', 'skipped');

-- name: workflow_steps_swept
-- planned per execution (see the top of this file)
-- Of an instance's running steps and items, those whose run has ended or is gone.
SELECT s.step, s.map_index, r.state AS run_state, r.last_error_message AS run_error
FROM workflow_steps s LEFT JOIN runs r ON r.id = s.run_id
WHERE s.instance_id = %(id)s AND s.state = 'running' AND s.run_id IS NOT NULL
  AND (r.id IS NULL OR r.state IN ('succeeded', 'dead', 'cancelled', 'skipped'));

-- name: workflow_step_runs
-- An instance's rows with their runs' timings and results, one query however wide a
-- fan-out (the REST instance view).
SELECT s.step, s.map_index, s.state, s.run_id, s.reason, s.updated_at,
       r.state AS run_state, r.result, r.attempt, r.created_at AS run_created_at,
       r.started_at, r.finished_at
FROM workflow_steps s LEFT JOIN runs r ON r.id = s.run_id
WHERE s.instance_id = %(id)s
ORDER BY s.step, s.map_index;
