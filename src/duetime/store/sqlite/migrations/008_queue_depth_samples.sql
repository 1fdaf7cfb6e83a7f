-- v8: queue depth as history kept by the leader (issue 17), whether or not a dashboard is open:
-- every 10 s one sample per tenant with runs due, running or dead, and one under tenant '' for
-- the whole cluster, written at every sampling instant (a tenant's series is read at those
-- instants: no row of its own there means zero). Pruned after 24 hours by the same duty
-- (maintenance/depth.py).
CREATE TABLE queue_depth_samples (
    tenant  TEXT NOT NULL,
    at      INTEGER NOT NULL,
    due     INTEGER NOT NULL,
    running INTEGER NOT NULL,
    dead    INTEGER NOT NULL,
    PRIMARY KEY (tenant, at)
);
CREATE INDEX queue_depth_samples_at ON queue_depth_samples (at);
