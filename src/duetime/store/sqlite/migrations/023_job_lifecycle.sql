-- v23 (issue 24, job lifecycle; see the PostgreSQL migration and docs/decisions/0023): a
-- pause's note (who, why, until when: instants are integer microseconds, UTC), pause on
-- failure, the declared-jobs source, the tzdata release of a cron job's next instant, the
-- job's lifecycle events, and a tenant's cap on registered jobs.
ALTER TABLE jobs ADD COLUMN paused_by TEXT;
ALTER TABLE jobs ADD COLUMN pause_note TEXT;
ALTER TABLE jobs ADD COLUMN paused_until INTEGER;
ALTER TABLE jobs ADD COLUMN pause_after_dead INTEGER CHECK (pause_after_dead IS NULL OR pause_after_dead >= 1);
ALTER TABLE jobs ADD COLUMN dead_count_from INTEGER;
ALTER TABLE jobs ADD COLUMN declared_source TEXT;
ALTER TABLE jobs ADD COLUMN tzdata_version TEXT;
CREATE INDEX jobs_pause_due ON jobs (paused_until) WHERE status = 'paused' AND paused_until IS NOT NULL;
CREATE INDEX jobs_pause_on_failure ON jobs (id) WHERE pause_after_dead IS NOT NULL AND status = 'active';
CREATE INDEX jobs_paused_on_failure ON jobs (id) WHERE status = 'paused' AND paused_by = 'duetime';
CREATE INDEX jobs_declared ON jobs (tenant, declared_source, name) WHERE declared_source IS NOT NULL;
CREATE TABLE job_events (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id  TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    at      INTEGER NOT NULL,
    kind    TEXT NOT NULL,
    actor   TEXT NOT NULL,
    detail  TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX job_events_job ON job_events (job_id, id);
ALTER TABLE tenants ADD COLUMN max_jobs INTEGER CHECK (max_jobs IS NULL OR max_jobs >= 1);
