-- v20 (issue 18): workflows (see PostgreSQL's migration and docs/decisions/0020).
ALTER TABLE runs ADD COLUMN result TEXT;
CREATE TABLE workflows (
    tenant      TEXT NOT NULL,
    name        TEXT NOT NULL,
    version     INTEGER NOT NULL,
    digest      TEXT NOT NULL,
    definition  TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (tenant, name, version)
);
CREATE TABLE workflow_instances (
    id            TEXT PRIMARY KEY,
    tenant        TEXT NOT NULL,
    workflow      TEXT NOT NULL,
    version       INTEGER NOT NULL,
    job_id        TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    start_run_id  TEXT NOT NULL UNIQUE,
    state         TEXT NOT NULL CHECK (state IN ('running', 'succeeded', 'failed', 'cancelled')),
    input         TEXT,
    reason        TEXT,
    created_at    INTEGER NOT NULL,
    finished_at   INTEGER
);
CREATE INDEX workflow_instances_list ON workflow_instances (tenant, created_at DESC, id);
CREATE INDEX workflow_instances_job ON workflow_instances (job_id);
CREATE INDEX workflow_instances_running ON workflow_instances (job_id) WHERE state = 'running';
CREATE INDEX workflow_instances_ended ON workflow_instances (finished_at)
    WHERE state IN ('succeeded', 'cancelled');
CREATE TABLE workflow_steps (
    instance_id  TEXT NOT NULL REFERENCES workflow_instances (id) ON DELETE CASCADE,
    step         TEXT NOT NULL,
    map_index    INTEGER NOT NULL,
    state        TEXT NOT NULL
                 CHECK (state IN ('pending', 'running', 'succeeded', 'failed', 'skipped', 'cancelled')),
    run_id       TEXT,
    reason       TEXT,
    items        INTEGER,
    items_ended  INTEGER NOT NULL DEFAULT 0,
    items_failed INTEGER NOT NULL DEFAULT 0,
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (instance_id, step, map_index)
);
CREATE UNIQUE INDEX workflow_steps_run ON workflow_steps (run_id);
CREATE INDEX workflow_steps_open ON workflow_steps (run_id) WHERE state = 'running';
-- each step's own row (a mapped step's counts its items): what planning reads
CREATE INDEX workflow_steps_whole ON workflow_steps (instance_id) WHERE map_index = -1;
