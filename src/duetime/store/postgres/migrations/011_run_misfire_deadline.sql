-- v11 (issue 15): a scheduled run carries its misfire deadline (scheduled_for + its job's
-- misfire grace, for jobs whose policy skips: `skip`, `fire_once`; NULL for `backfill` and for
-- manual runs), and the misfire judge walks an index on it. It walked `runs_waiting`
-- (scheduled_for) up to now and compared each due run with its job's grace: every run due and
-- not claimed yet, every second, per worker — 20 ms and 300,000 buffers a call with 50,000
-- one-shots due at once. Rolling: the column is nullable and old code never reads it; runs
-- written by old code (NULL) are judged by new code only once written again, which a worker's
-- claim makes moot (they are due already). The backfill below covers the runs waiting now.
ALTER TABLE runs ADD COLUMN misfire_at timestamptz;
UPDATE runs r SET misfire_at = r.scheduled_for + make_interval(secs => j.misfire_grace_s)
FROM jobs j
WHERE j.id = r.job_id AND r.state = 'scheduled' AND r.attempt = 0 AND r.trigger = 'schedule'
  AND j.misfire_policy IN ('skip', 'fire_once');
DROP INDEX runs_waiting;
CREATE INDEX runs_misfire_due ON runs (misfire_at)
    WHERE state = 'scheduled' AND attempt = 0 AND misfire_at IS NOT NULL;
