-- v11 (issue 15): a scheduled run carries its misfire deadline (scheduled_for + its job's
-- misfire grace, in microseconds, for jobs whose policy skips: `skip`, `fire_once`; NULL for
-- `backfill` and for manual runs), and the misfire judge walks an index on it instead of every
-- due run (see the PostgreSQL migration).
ALTER TABLE runs ADD COLUMN misfire_at INTEGER;
UPDATE runs SET misfire_at = scheduled_for + CAST((
    SELECT j.misfire_grace_s FROM jobs j WHERE j.id = runs.job_id) * 1000000 AS INTEGER)
WHERE trigger = 'schedule'
  AND (state = 'scheduled' OR (state = 'running' AND started_at IS NULL))
  AND (SELECT j.misfire_policy FROM jobs j WHERE j.id = runs.job_id) IN ('skip', 'fire_once');
DROP INDEX runs_waiting;
CREATE INDEX runs_misfire_due ON runs (misfire_at)
    WHERE state = 'scheduled' AND attempt = 0 AND misfire_at IS NOT NULL;
