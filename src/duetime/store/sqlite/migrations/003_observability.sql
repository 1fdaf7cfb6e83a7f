-- v3: observability. Jobs carry an SLA window and an expected duration (alerts); the leader
-- keeps alert incidents, one open incident per (kind, subject), so a new leader after a
-- failover neither repeats nor loses one.
ALTER TABLE jobs ADD COLUMN sla_s REAL;
ALTER TABLE jobs ADD COLUMN expected_duration_s REAL;
CREATE INDEX jobs_sla ON jobs (id) WHERE sla_s IS NOT NULL AND status = 'active';

CREATE TABLE alert_incidents (
    id                  TEXT PRIMARY KEY,
    kind                TEXT NOT NULL,
    subject             TEXT NOT NULL,
    tenant              TEXT,
    job_id              TEXT,
    run_id              TEXT,
    summary             TEXT NOT NULL,
    details             TEXT NOT NULL DEFAULT '{}',
    opened_at           INTEGER NOT NULL,
    resolved_at         INTEGER,
    resolution          TEXT,
    leader_term         INTEGER,
    -- delivery to the alert webhooks: each message (fired, then resolved) is marked sent once
    -- every webhook took it; `delivered` lists the webhooks that took the pending one.
    fired_sent_at       INTEGER,
    resolved_sent_at    INTEGER,
    delivered           TEXT NOT NULL DEFAULT '[]',
    delivery_attempts   INTEGER NOT NULL DEFAULT 0,
    next_delivery_at    INTEGER,
    last_delivery_error TEXT
);
CREATE UNIQUE INDEX alert_incidents_open ON alert_incidents (kind, subject) WHERE resolved_at IS NULL;
CREATE INDEX alert_incidents_unsent ON alert_incidents (opened_at)
    WHERE fired_sent_at IS NULL OR (resolved_at IS NOT NULL AND resolved_sent_at IS NULL);
CREATE INDEX alert_incidents_opened ON alert_incidents (opened_at);
