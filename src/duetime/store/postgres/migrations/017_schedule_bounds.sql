-- v17 (issue 16, bounds): a recurring job's bounds — no occurrence before `start_at` or after
-- `end_at` fires, and at most `max_runs` scheduled runs are created (NULL: unbounded) — and
-- `runs_created`, the scheduled runs counted against `max_runs` (counted only while it is
-- set; the scheduler adds to it in the transaction that creates the runs, the job row locked).
ALTER TABLE jobs ADD COLUMN start_at timestamptz;
ALTER TABLE jobs ADD COLUMN end_at timestamptz;
ALTER TABLE jobs ADD COLUMN max_runs integer CHECK (max_runs IS NULL OR max_runs >= 1);
ALTER TABLE jobs ADD COLUMN runs_created bigint NOT NULL DEFAULT 0;
