-- v25 (issue 19): a tenant's previous webhook signing secret and the end of its rotation's
-- overlap window (integer microseconds); the circuit breakers each worker reports (see
-- PostgreSQL's migration).
ALTER TABLE tenants ADD COLUMN webhook_secret_previous TEXT;
ALTER TABLE tenants ADD COLUMN webhook_secret_previous_until INTEGER;

CREATE TABLE target_breakers (
    worker_id   TEXT NOT NULL,
    key         TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('open', 'half_open')),
    failures    INTEGER NOT NULL,
    opened_at   INTEGER NOT NULL,
    retry_at    INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (worker_id, key)
) WITHOUT ROWID;
