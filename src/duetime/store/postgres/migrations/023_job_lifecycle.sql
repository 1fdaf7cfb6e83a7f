-- v23 (issue 24, job lifecycle; docs/decisions/0023-job-lifecycle.md):
-- * a pause's note: who paused the job, why, and until when (`paused_until`: the leader's
--   maintenance resumes it at that instant and records the resume in `job_events`);
-- * pause on failure: `pause_after_dead` consecutive dead runs pause the job (a leader pass;
--   the streak counts only runs finished after `dead_count_from`, set at each resume);
-- * `declared_source`: the jobs a program declared with `app.sync(..., source=…)`, the only
--   ones a later sync of that source may retire;
-- * `tzdata_version`: the tzdata release the job's next instant was computed with;
-- * `job_events`: a job's lifecycle history (pauses, resumes, retirements, recomputes);
-- * `tenants.max_jobs`: a tenant's cap on registered (not cancelled) jobs, NULL: none.
ALTER TABLE jobs ADD COLUMN paused_by text;
ALTER TABLE jobs ADD COLUMN pause_note text;
ALTER TABLE jobs ADD COLUMN paused_until timestamptz;
ALTER TABLE jobs ADD COLUMN pause_after_dead integer
    CHECK (pause_after_dead IS NULL OR pause_after_dead >= 1);
ALTER TABLE jobs ADD COLUMN dead_count_from timestamptz;
ALTER TABLE jobs ADD COLUMN declared_source text;
ALTER TABLE jobs ADD COLUMN tzdata_version text;
CREATE INDEX jobs_pause_due ON jobs (paused_until)
    WHERE status = 'paused' AND paused_until IS NOT NULL;
CREATE INDEX jobs_pause_on_failure ON jobs (id)
    WHERE pause_after_dead IS NOT NULL AND status = 'active';
CREATE INDEX jobs_paused_on_failure ON jobs (id)
    WHERE status = 'paused' AND paused_by = 'duetime';
CREATE INDEX jobs_declared ON jobs (tenant, declared_source, name)
    WHERE declared_source IS NOT NULL;
CREATE TABLE job_events (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id  uuid NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    at      timestamptz NOT NULL,
    kind    text NOT NULL,
    actor   text NOT NULL,
    detail  jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX job_events_job ON job_events (job_id, id);
ALTER TABLE tenants ADD COLUMN max_jobs integer CHECK (max_jobs IS NULL OR max_jobs >= 1);
