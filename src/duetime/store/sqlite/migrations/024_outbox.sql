-- v24 (issue 19, broker targets; see the PostgreSQL migration and docs/decisions/0026): the
-- transactional outbox. Instants are integer microseconds (UTC).
CREATE TABLE outbox (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id    TEXT NOT NULL UNIQUE,
    tenant        TEXT NOT NULL,
    run_id        TEXT NOT NULL,
    attempt       INTEGER NOT NULL,
    connection    TEXT NOT NULL,
    target        TEXT NOT NULL,
    body          TEXT NOT NULL,
    headers       TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    available_at  INTEGER NOT NULL,
    tries         INTEGER NOT NULL DEFAULT 0,
    last_error    TEXT,
    sent_at       INTEGER,
    dead_at       INTEGER
);
CREATE INDEX outbox_pending ON outbox (available_at) WHERE sent_at IS NULL AND dead_at IS NULL;
CREATE INDEX outbox_sent ON outbox (sent_at) WHERE sent_at IS NOT NULL;
CREATE INDEX outbox_dead ON outbox (tenant, dead_at) WHERE dead_at IS NOT NULL;
