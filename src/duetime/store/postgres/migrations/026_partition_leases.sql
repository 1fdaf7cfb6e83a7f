-- v26 (issue 23): leased partition ownership (docs/decisions/0028-partition-leases.md).
-- partition_members: the schedulers taking a share of the 256 job partitions, each alive
-- while its expires_at is ahead (renewed every third of the lease). partition_leases: one row
-- per partition ever leased; the owner materializes its jobs while expires_at is ahead; the epoch
-- (the fencing token) increases whenever the lease is taken anew. Rolling upgrade: a previous
-- release's schedulers ignore both tables and serve their static range (or all partitions),
-- which the runs' (job_id, scheduled_for) uniqueness keeps free of doubles.
CREATE TABLE partition_members (
    node_id    text PRIMARY KEY,
    joined_at  timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);

CREATE TABLE partition_leases (
    partition_key smallint PRIMARY KEY CHECK (partition_key BETWEEN 0 AND 255),
    owner         text NOT NULL,
    epoch         bigint NOT NULL,
    expires_at    timestamptz NOT NULL
);
