-- v3: observability. Jobs carry an SLA window and an expected duration (alerts); the leader
-- keeps alert incidents, one open incident per (kind, subject), so a new leader after a
-- failover neither repeats nor loses one.
ALTER TABLE jobs ADD COLUMN sla_s double precision;
ALTER TABLE jobs ADD COLUMN expected_duration_s double precision;
CREATE INDEX jobs_sla ON jobs (id) WHERE sla_s IS NOT NULL AND status = 'active';

CREATE TABLE alert_incidents (
    id                  uuid PRIMARY KEY,
    kind                text NOT NULL,
    subject             text NOT NULL,
    tenant              text,
    job_id              uuid,
    run_id              uuid,
    summary             text NOT NULL,
    details             json NOT NULL DEFAULT '{}',
    opened_at           timestamptz NOT NULL,
    resolved_at         timestamptz,
    resolution          text,
    leader_term         bigint,
    -- delivery to the alert webhooks: each message (fired, then resolved) is marked sent once
    -- every webhook took it; `delivered` lists the webhooks that took the pending one.
    fired_sent_at       timestamptz,
    resolved_sent_at    timestamptz,
    delivered           jsonb NOT NULL DEFAULT '[]',
    delivery_attempts   integer NOT NULL DEFAULT 0,
    next_delivery_at    timestamptz,
    last_delivery_error text
);
CREATE UNIQUE INDEX alert_incidents_open ON alert_incidents (kind, subject) WHERE resolved_at IS NULL;
CREATE INDEX alert_incidents_unsent ON alert_incidents (opened_at)
    WHERE fired_sent_at IS NULL OR (resolved_at IS NOT NULL AND resolved_sent_at IS NULL);
CREATE INDEX alert_incidents_opened ON alert_incidents (opened_at);
