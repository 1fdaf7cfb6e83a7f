-- v18 (issue 22): a `superadmin` role manages the installation; `admin` keys now manage only
-- their own tenant (see PostgreSQL's migration). SQLite cannot change a CHECK constraint: the
-- table is rebuilt (renamed aside, created again, copied, the old one dropped), in the
-- migration's one transaction.
ALTER TABLE api_keys RENAME TO api_keys_v17;
CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    tenant       TEXT NOT NULL,
    role         TEXT NOT NULL CHECK (role IN ('viewer', 'operator', 'admin', 'superadmin')),
    name         TEXT NOT NULL,
    prefix       TEXT NOT NULL,
    key_hash     TEXT NOT NULL UNIQUE,
    created_at   INTEGER NOT NULL,
    revoked_at   INTEGER,
    last_used_at INTEGER
);
INSERT INTO api_keys (id, tenant, role, name, prefix, key_hash, created_at, revoked_at,
                      last_used_at)
SELECT id, tenant, role, name, prefix, key_hash, created_at, revoked_at, last_used_at
FROM api_keys_v17;
DROP TABLE api_keys_v17;
