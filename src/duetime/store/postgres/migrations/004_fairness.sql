-- v4: fairness (docs/fairness.md). Claims share each batch among tenants, order runs by
-- priority with aging, honour per-tenant quotas and serve worker pools (queues).
-- The claim walks the (tenant, queue, priority) groups of scheduled runs and reads each group's
-- oldest runs in available_at order: this index replaces runs_ready (priority DESC, available_at).
CREATE INDEX runs_fair ON runs (tenant, queue, priority, available_at) WHERE state = 'scheduled';
DROP INDEX runs_ready;
-- The claim's locked step reads the runs limited by an overlap key without wading through the
-- others of a busy group.
CREATE INDEX runs_keyed_ready ON runs (tenant, queue, priority, available_at)
    WHERE state = 'scheduled' AND concurrency_key IS NOT NULL;

-- A tenant's token bucket for max_starts_per_second (NULL: full), updated by the claims that
-- start its runs, under the tenant's advisory lock.
ALTER TABLE tenants ADD COLUMN bucket_tokens double precision;
ALTER TABLE tenants ADD COLUMN bucket_at timestamptz;

-- A job's jitter window: each run becomes available up to this many seconds after its
-- scheduled instant (deterministic per occurrence); scheduled_for never moves.
ALTER TABLE jobs ADD COLUMN jitter_s double precision NOT NULL DEFAULT 0;
