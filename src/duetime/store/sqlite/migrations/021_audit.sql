-- v21 (issue 22): the audit trail (see PostgreSQL's migration). Instants are integer
-- microseconds; the change is JSON text.
CREATE TABLE audit (
    id           TEXT PRIMARY KEY,
    tenant       TEXT NOT NULL,
    at           INTEGER NOT NULL,
    actor        TEXT NOT NULL,
    action       TEXT NOT NULL,
    subject_kind TEXT NOT NULL,
    subject_id   TEXT,
    subject_name TEXT,
    change       TEXT
);
CREATE INDEX audit_tenant_at ON audit (tenant, at DESC, id DESC);
CREATE INDEX audit_at ON audit (at);
