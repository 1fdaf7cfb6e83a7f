-- v17 (issue 16, bounds): a recurring job's start_at / end_at (integer microseconds, UTC),
-- max_runs and the scheduled runs counted against it (see the PostgreSQL migration).
ALTER TABLE jobs ADD COLUMN start_at INTEGER;
ALTER TABLE jobs ADD COLUMN end_at INTEGER;
ALTER TABLE jobs ADD COLUMN max_runs INTEGER CHECK (max_runs IS NULL OR max_runs >= 1);
ALTER TABLE jobs ADD COLUMN runs_created INTEGER NOT NULL DEFAULT 0;
