-- v25 (issue 19): a tenant's previous webhook signing secret, still signed with until its
-- rotation's overlap window ends; and the circuit breakers each worker reports (state decided
-- per worker process: docs/decisions/0027). Rolling upgrade: the previous release neither
-- reads nor writes them (its workers sign with the current secret only).
ALTER TABLE tenants ADD COLUMN webhook_secret_previous text;
ALTER TABLE tenants ADD COLUMN webhook_secret_previous_until timestamptz;

CREATE TABLE target_breakers (
    worker_id   text NOT NULL,
    key         text NOT NULL,
    state       text NOT NULL CHECK (state IN ('open', 'half_open')),
    failures    integer NOT NULL,
    opened_at   timestamptz NOT NULL,
    retry_at    timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (worker_id, key)
);
