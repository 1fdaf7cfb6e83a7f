-- v2: tenants and API keys, non-Python targets, leadership and nodes, long-run state, overlap.
CREATE TABLE tenants (
    id                    text PRIMARY KEY,
    webhook_secret        text NOT NULL,
    max_in_flight         integer,
    max_starts_per_second double precision,
    weight                integer NOT NULL DEFAULT 1,
    created_at            timestamptz NOT NULL
);

CREATE TABLE api_keys (
    id           uuid PRIMARY KEY,
    tenant       text NOT NULL,
    role         text NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    name         text NOT NULL,
    prefix       text NOT NULL,
    key_hash     text NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL,
    revoked_at   timestamptz,
    last_used_at timestamptz
);

-- A job's target when it is not a Python task: {"type": "http", "url": ..., ...}.
ALTER TABLE jobs ADD COLUMN target json;
ALTER TABLE runs ADD COLUMN target json;

-- Overlap and concurrency keys.
ALTER TABLE jobs ADD COLUMN max_concurrency integer NOT NULL DEFAULT 1;
ALTER TABLE jobs ADD COLUMN concurrency_key text;
ALTER TABLE jobs ADD COLUMN max_backfill integer NOT NULL DEFAULT 100;
ALTER TABLE runs ADD COLUMN concurrency_key text;

-- Long-running work: progress, checkpoint handed to the next attempt, cooperative cancel.
ALTER TABLE runs ADD COLUMN progress double precision;
ALTER TABLE runs ADD COLUMN progress_message text;
ALTER TABLE runs ADD COLUMN checkpoint json;
ALTER TABLE runs ADD COLUMN cancel_requested boolean NOT NULL DEFAULT false;

-- Claims count the running runs of an overlap key (concurrency_key: "job:<id>" or "key:<k>").
CREATE INDEX runs_running_key ON runs (concurrency_key) WHERE state = 'running' AND concurrency_key IS NOT NULL;

-- The misfire sweep looks for never-attempted scheduled runs long past their instant.
CREATE INDEX runs_waiting ON runs (scheduled_for)
    WHERE state = 'scheduled' AND attempt = 0 AND trigger = 'schedule';

-- Retention prunes finished runs by age.
CREATE INDEX runs_finished ON runs (finished_at) WHERE finished_at IS NOT NULL;

-- One leader, elected with an expiry; its term fences leader-only writes.
CREATE TABLE leader (
    name       text PRIMARY KEY CHECK (name = 'default'),
    node_id    text NOT NULL,
    term       bigint NOT NULL,
    elected_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);

-- Every process registers as a node (roles: scheduler, worker, api) and heartbeats.
CREATE TABLE nodes (
    id           text PRIMARY KEY,
    host         text NOT NULL,
    pid          integer NOT NULL,
    roles        jsonb NOT NULL,
    partitions   text,
    started_at   timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL
);
