-- v21 (issue 22): the audit trail — one row per mutating call (who, what, on what, when, the
-- change), written in the transaction of the change. Append-only: the only delete is
-- retention's (audit_prune, with run history). Rolling upgrade: the previous release neither
-- reads nor writes it.
CREATE TABLE audit (
    id           uuid PRIMARY KEY,
    tenant       text NOT NULL,
    at           timestamptz NOT NULL,
    actor        text NOT NULL,
    action       text NOT NULL,
    subject_kind text NOT NULL,
    subject_id   text,
    subject_name text,
    change       jsonb
);
-- The reading order (newest first, per tenant) and retention's scan by age.
CREATE INDEX audit_tenant_at ON audit (tenant, at DESC, id DESC);
CREATE INDEX audit_at ON audit (at);
