-- duetime schema v1 (PostgreSQL).
-- Payloads and metadata are `json`, not `jsonb`: they come back exactly as sent (float
-- spelling, key order, \u0000 escapes), which jsonb does not promise.
CREATE TABLE jobs (
    id              uuid PRIMARY KEY,
    tenant          text NOT NULL,
    name            text NOT NULL,
    task            text NOT NULL,
    payload         json NOT NULL,
    schedule_kind   text NOT NULL CHECK (schedule_kind IN ('now', 'at', 'cron', 'every')),
    cron            text,
    tz              text NOT NULL DEFAULT 'UTC',
    at_instant      timestamptz,
    every_us        bigint,
    anchor          timestamptz,
    status          text NOT NULL CHECK (status IN ('active', 'paused', 'cancelled', 'completed')),
    priority        integer NOT NULL DEFAULT 0,
    max_attempts    integer NOT NULL,
    backoff_base    double precision NOT NULL,
    backoff_factor  double precision NOT NULL,
    backoff_cap     double precision NOT NULL,
    timeout_s       double precision,
    misfire_policy  text NOT NULL,
    misfire_grace_s double precision NOT NULL,
    overlap_policy  text NOT NULL,
    delivery        text NOT NULL,
    queue           text NOT NULL DEFAULT 'default',
    tags            jsonb NOT NULL DEFAULT '[]',
    metadata        json NOT NULL DEFAULT '{}',
    partition_key   smallint NOT NULL CHECK (partition_key BETWEEN 0 AND 255),
    next_fire_at    timestamptz,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    UNIQUE (tenant, name)
);
CREATE INDEX jobs_due ON jobs (next_fire_at) WHERE status = 'active' AND next_fire_at IS NOT NULL;

CREATE TABLE runs (
    id                 uuid PRIMARY KEY,
    job_id             uuid NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    tenant             text NOT NULL,
    job_name           text NOT NULL,
    task               text NOT NULL,
    queue              text NOT NULL,
    payload            json NOT NULL,
    scheduled_for      timestamptz NOT NULL,
    available_at       timestamptz NOT NULL,
    state              text NOT NULL CHECK (state IN ('scheduled', 'running', 'succeeded', 'dead', 'cancelled', 'skipped')),
    priority           integer NOT NULL,
    attempt            integer NOT NULL DEFAULT 0,
    max_attempts       integer NOT NULL,
    backoff_base       double precision NOT NULL,
    backoff_factor     double precision NOT NULL,
    backoff_cap        double precision NOT NULL,
    timeout_s          double precision,
    delivery           text NOT NULL,
    one_shot           boolean NOT NULL DEFAULT false,
    token              bigint NOT NULL DEFAULT 0,
    lease_owner        text,
    lease_expires_at   timestamptz,
    claimed_at         timestamptz,
    started_at         timestamptz,
    finished_at        timestamptz,
    trigger            text NOT NULL CHECK (trigger IN ('schedule', 'manual')),
    idempotency_key    text,
    request_hash       text,
    reason             text,
    last_error_class   text,
    last_error_message text,
    replays            integer NOT NULL DEFAULT 0,
    created_at         timestamptz NOT NULL
);
CREATE UNIQUE INDEX runs_job_occurrence ON runs (job_id, scheduled_for) WHERE idempotency_key IS NULL;
CREATE UNIQUE INDEX runs_job_idempotency_key ON runs (job_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX runs_ready ON runs (priority DESC, available_at) WHERE state = 'scheduled';
CREATE INDEX runs_leases ON runs (lease_expires_at) WHERE state = 'running';
CREATE INDEX runs_job_history ON runs (job_id, scheduled_for DESC);
CREATE INDEX runs_dead ON runs (tenant, finished_at DESC) WHERE state = 'dead';

CREATE TABLE attempts (
    run_id        uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    token         bigint NOT NULL,
    job_id        uuid NOT NULL,
    tenant        text NOT NULL,
    number        integer NOT NULL,
    worker_id     text NOT NULL,
    claimed_at    timestamptz NOT NULL,
    started_at    timestamptz,
    finished_at   timestamptz NOT NULL,
    outcome       text NOT NULL CHECK (outcome IN ('succeeded', 'failed', 'lost', 'stale', 'timed_out', 'cancelled')),
    error_class   text,
    error_message text,
    PRIMARY KEY (run_id, token)
);
CREATE INDEX attempts_finished ON attempts (finished_at);

CREATE TABLE run_skips (
    job_id     uuid NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    first_at   timestamptz NOT NULL,
    last_at    timestamptz NOT NULL,
    count      integer NOT NULL,
    reason     text NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX run_skips_job ON run_skips (job_id, first_at);

CREATE TABLE workers (
    id           text PRIMARY KEY,
    host         text NOT NULL,
    pid          integer NOT NULL,
    tasks        jsonb NOT NULL,
    queues       jsonb NOT NULL,
    started_at   timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL
);

CREATE TABLE known_tasks (
    task         text PRIMARY KEY,
    last_seen_at timestamptz NOT NULL
);
