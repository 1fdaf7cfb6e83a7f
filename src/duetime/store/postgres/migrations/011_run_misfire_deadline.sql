-- v11 (issue 15): a scheduled run carries its misfire deadline (scheduled_for + its job's
-- misfire grace, for jobs whose policy skips: `skip`, `fire_once`; NULL for `backfill` and for
-- manual runs), and the misfire judge walks an index on it. It walked `runs_waiting`
-- (scheduled_for) up to now and compared each due run with its job's grace: every run due and
-- not claimed yet, every second, per worker — 20 ms and 300,000 buffers a call with 50,000
-- one-shots due at once. The update below gives the runs waiting now (or claimed ahead of
-- their instant) their deadline. Old code never reads the column, but runs an old scheduler
-- writes during the upgrade carry none and are never judged a misfire (they run, as under
-- `backfill`): upgrade the scheduler nodes together.
ALTER TABLE runs ADD COLUMN misfire_at timestamptz;
UPDATE runs r SET misfire_at = r.scheduled_for + make_interval(secs => j.misfire_grace_s)
FROM jobs j
WHERE j.id = r.job_id AND r.trigger = 'schedule' AND j.misfire_policy IN ('skip', 'fire_once')
  AND (r.state = 'scheduled' OR (r.state = 'running' AND r.started_at IS NULL));
DROP INDEX runs_waiting;
CREATE INDEX runs_misfire_due ON runs (misfire_at)
    WHERE state = 'scheduled' AND attempt = 0 AND misfire_at IS NOT NULL;
