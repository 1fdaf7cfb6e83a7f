-- v26 (issue 23): leased partition ownership (see PostgreSQL's migration). Instants are
-- integer microseconds.
CREATE TABLE partition_members (
    node_id    TEXT PRIMARY KEY,
    joined_at  INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE partition_leases (
    partition_key INTEGER PRIMARY KEY CHECK (partition_key BETWEEN 0 AND 255),
    owner         TEXT NOT NULL,
    epoch         INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL
);
