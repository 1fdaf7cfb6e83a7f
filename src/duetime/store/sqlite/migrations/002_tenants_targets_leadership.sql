-- v2: tenants and API keys, non-Python targets, leadership and nodes, long-run state, overlap.
CREATE TABLE tenants (
    id                    TEXT PRIMARY KEY,
    webhook_secret        TEXT NOT NULL,
    max_in_flight         INTEGER,
    max_starts_per_second REAL,
    weight                INTEGER NOT NULL DEFAULT 1,
    created_at            INTEGER NOT NULL
);

CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    tenant       TEXT NOT NULL,
    role         TEXT NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    name         TEXT NOT NULL,
    prefix       TEXT NOT NULL,
    key_hash     TEXT NOT NULL UNIQUE,
    created_at   INTEGER NOT NULL,
    revoked_at   INTEGER,
    last_used_at INTEGER
);

-- A job's target when it is not a Python task: {"type": "http", "url": ..., ...}.
ALTER TABLE jobs ADD COLUMN target TEXT;
ALTER TABLE runs ADD COLUMN target TEXT;

-- Overlap and concurrency keys.
ALTER TABLE jobs ADD COLUMN max_concurrency INTEGER NOT NULL DEFAULT 1;
ALTER TABLE jobs ADD COLUMN concurrency_key TEXT;
ALTER TABLE jobs ADD COLUMN max_backfill INTEGER NOT NULL DEFAULT 100;
ALTER TABLE runs ADD COLUMN concurrency_key TEXT;

-- Long-running work: progress, checkpoint handed to the next attempt, cooperative cancel.
ALTER TABLE runs ADD COLUMN progress REAL;
ALTER TABLE runs ADD COLUMN progress_message TEXT;
ALTER TABLE runs ADD COLUMN checkpoint TEXT;
ALTER TABLE runs ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;

-- Claims count the running runs of an overlap key (concurrency_key: "job:<id>" or "key:<k>").
CREATE INDEX runs_running_key ON runs (concurrency_key) WHERE state = 'running' AND concurrency_key IS NOT NULL;

-- The misfire sweep looks for never-attempted scheduled runs long past their instant.
CREATE INDEX runs_waiting ON runs (scheduled_for)
    WHERE state = 'scheduled' AND attempt = 0 AND trigger = 'schedule';

-- Retention prunes finished runs by age.
CREATE INDEX runs_finished ON runs (finished_at) WHERE finished_at IS NOT NULL;

-- One leader, elected with an expiry; its term fences leader-only writes.
CREATE TABLE leader (
    name       TEXT PRIMARY KEY CHECK (name = 'default'),
    node_id    TEXT NOT NULL,
    term       INTEGER NOT NULL,
    elected_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);

-- Every process registers as a node (roles: scheduler, worker, api) and heartbeats.
CREATE TABLE nodes (
    id           TEXT PRIMARY KEY,
    host         TEXT NOT NULL,
    pid          INTEGER NOT NULL,
    roles        TEXT NOT NULL,
    partitions   TEXT,
    started_at   INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL
);
