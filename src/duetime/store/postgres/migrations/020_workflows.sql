-- v20 (issue 18): workflows. A definition is stored once per version (by content digest);
-- an instance is started by a run of a workflow job (one instance per start run); each step
-- (and each item of a mapped step) is one row, unique per (instance, step, map index), and its
-- run is a run of the workflow job keyed 'wf:<instance>:<step>:<index>' (runs' unique
-- (job_id, idempotency_key)): a step's run is created once, in the transaction that ended the
-- parent (docs/decisions/0020-workflows-in-the-run-table.md). Every run keeps its handler's
-- result. Rolling upgrade: the previous release neither reads nor writes these.
ALTER TABLE runs ADD COLUMN result json;
CREATE TABLE workflows (
    tenant      text NOT NULL,
    name        text NOT NULL,
    version     integer NOT NULL,
    digest      text NOT NULL,
    definition  json NOT NULL,
    created_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant, name, version)
);
CREATE TABLE workflow_instances (
    id            uuid PRIMARY KEY,
    tenant        text NOT NULL,
    workflow      text NOT NULL,
    version       integer NOT NULL,
    job_id        uuid NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    start_run_id  uuid NOT NULL UNIQUE,
    state         text NOT NULL CHECK (state IN ('running', 'succeeded', 'failed', 'cancelled')),
    input         json,
    reason        text,
    created_at    timestamptz NOT NULL,
    finished_at   timestamptz
);
CREATE INDEX workflow_instances_list ON workflow_instances (tenant, created_at DESC, id);
CREATE INDEX workflow_instances_job ON workflow_instances (job_id);
CREATE INDEX workflow_instances_running ON workflow_instances (job_id) WHERE state = 'running';
CREATE INDEX workflow_instances_ended ON workflow_instances (finished_at)
    WHERE state IN ('succeeded', 'cancelled');
CREATE TABLE workflow_steps (
    instance_id  uuid NOT NULL REFERENCES workflow_instances (id) ON DELETE CASCADE,
    step         text NOT NULL,
    map_index    integer NOT NULL,
    state        text NOT NULL
                 CHECK (state IN ('pending', 'running', 'succeeded', 'failed', 'skipped', 'cancelled')),
    run_id       uuid,
    reason       text,
    items        integer,
    items_ended  integer NOT NULL DEFAULT 0,
    items_failed integer NOT NULL DEFAULT 0,
    updated_at   timestamptz NOT NULL,
    PRIMARY KEY (instance_id, step, map_index)
);
CREATE UNIQUE INDEX workflow_steps_run ON workflow_steps (run_id);
CREATE INDEX workflow_steps_open ON workflow_steps (run_id) WHERE state = 'running';
-- each step's own row (a mapped step's counts its items): what planning reads
CREATE INDEX workflow_steps_whole ON workflow_steps (instance_id) WHERE map_index = -1;
