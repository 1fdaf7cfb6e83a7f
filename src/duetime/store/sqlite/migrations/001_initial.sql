-- duetime schema v1 (SQLite). Instants are INTEGER microseconds since the Unix epoch, UTC.
CREATE TABLE jobs (
    id              TEXT PRIMARY KEY,
    tenant          TEXT NOT NULL,
    name            TEXT NOT NULL,
    task            TEXT NOT NULL,
    payload         TEXT NOT NULL,
    schedule_kind   TEXT NOT NULL CHECK (schedule_kind IN ('now', 'at', 'cron', 'every')),
    cron            TEXT,
    tz              TEXT NOT NULL DEFAULT 'UTC',
    at_instant      INTEGER,
    every_us        INTEGER,
    anchor          INTEGER,
    status          TEXT NOT NULL CHECK (status IN ('active', 'paused', 'cancelled', 'completed')),
    priority        INTEGER NOT NULL DEFAULT 0,
    max_attempts    INTEGER NOT NULL,
    backoff_base    REAL NOT NULL,
    backoff_factor  REAL NOT NULL,
    backoff_cap     REAL NOT NULL,
    timeout_s       REAL,
    misfire_policy  TEXT NOT NULL,
    misfire_grace_s REAL NOT NULL,
    overlap_policy  TEXT NOT NULL,
    delivery        TEXT NOT NULL,
    queue           TEXT NOT NULL DEFAULT 'default',
    tags            TEXT NOT NULL DEFAULT '[]',
    metadata        TEXT NOT NULL DEFAULT '{}',
    partition_key   INTEGER NOT NULL CHECK (partition_key BETWEEN 0 AND 255),
    next_fire_at    INTEGER,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    UNIQUE (tenant, name)
);
CREATE INDEX jobs_due ON jobs (next_fire_at) WHERE status = 'active' AND next_fire_at IS NOT NULL;

CREATE TABLE runs (
    id                 TEXT PRIMARY KEY,
    job_id             TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    tenant             TEXT NOT NULL,
    job_name           TEXT NOT NULL,
    task               TEXT NOT NULL,
    queue              TEXT NOT NULL,
    payload            TEXT NOT NULL,
    scheduled_for      INTEGER NOT NULL,
    available_at       INTEGER NOT NULL,
    state              TEXT NOT NULL CHECK (state IN ('scheduled', 'running', 'succeeded', 'dead', 'cancelled', 'skipped')),
    priority           INTEGER NOT NULL,
    attempt            INTEGER NOT NULL DEFAULT 0,
    max_attempts       INTEGER NOT NULL,
    backoff_base       REAL NOT NULL,
    backoff_factor     REAL NOT NULL,
    backoff_cap        REAL NOT NULL,
    timeout_s          REAL,
    delivery           TEXT NOT NULL,
    one_shot           INTEGER NOT NULL DEFAULT 0,
    token              INTEGER NOT NULL DEFAULT 0,
    lease_owner        TEXT,
    lease_expires_at   INTEGER,
    claimed_at         INTEGER,
    started_at         INTEGER,
    finished_at        INTEGER,
    trigger            TEXT NOT NULL CHECK (trigger IN ('schedule', 'manual')),
    idempotency_key    TEXT,
    request_hash       TEXT,
    reason             TEXT,
    last_error_class   TEXT,
    last_error_message TEXT,
    replays            INTEGER NOT NULL DEFAULT 0,
    created_at         INTEGER NOT NULL
);
CREATE UNIQUE INDEX runs_job_occurrence ON runs (job_id, scheduled_for) WHERE idempotency_key IS NULL;
CREATE UNIQUE INDEX runs_job_idempotency_key ON runs (job_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX runs_ready ON runs (priority DESC, available_at) WHERE state = 'scheduled';
CREATE INDEX runs_leases ON runs (lease_expires_at) WHERE state = 'running';
CREATE INDEX runs_job_history ON runs (job_id, scheduled_for DESC);
CREATE INDEX runs_dead ON runs (tenant, finished_at DESC) WHERE state = 'dead';

CREATE TABLE attempts (
    run_id        TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    token         INTEGER NOT NULL,
    job_id        TEXT NOT NULL,
    tenant        TEXT NOT NULL,
    number        INTEGER NOT NULL,
    worker_id     TEXT NOT NULL,
    claimed_at    INTEGER NOT NULL,
    started_at    INTEGER,
    finished_at   INTEGER NOT NULL,
    outcome       TEXT NOT NULL CHECK (outcome IN ('succeeded', 'failed', 'lost', 'stale', 'timed_out', 'cancelled')),
    error_class   TEXT,
    error_message TEXT,
    PRIMARY KEY (run_id, token)
);
CREATE INDEX attempts_finished ON attempts (finished_at);

-- Occurrences deliberately not run (misfire policy), recorded as ranges: "why didn't it run?".
CREATE TABLE run_skips (
    job_id     TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    first_at   INTEGER NOT NULL,
    last_at    INTEGER NOT NULL,
    count      INTEGER NOT NULL,
    reason     TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX run_skips_job ON run_skips (job_id, first_at);

CREATE TABLE workers (
    id           TEXT PRIMARY KEY,
    host         TEXT NOT NULL,
    pid          INTEGER NOT NULL,
    tasks        TEXT NOT NULL,
    queues       TEXT NOT NULL,
    started_at   INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL
);

-- Every task name a worker has ever declared it serves (registration checks this).
CREATE TABLE known_tasks (
    task         TEXT PRIMARY KEY,
    last_seen_at INTEGER NOT NULL
);
