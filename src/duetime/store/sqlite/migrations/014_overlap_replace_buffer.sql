-- v14 (issue 16, overlap; decision 0016): `replace` waits for the old run to stop, and the
-- runs waiting for an overlap key can be bounded.
-- jobs.replace_timeout_s: seconds a replaced run gets to stop before its successor starts anyway.
-- jobs.max_waiting: runs that may wait for the key while it is busy (0 = no limit).
-- runs.replace_deadline: set on a running run a newer one replaces (with cancel_requested);
-- past it the run is cancelled outright and its successor starts (integer microseconds).
ALTER TABLE jobs ADD COLUMN replace_timeout_s REAL NOT NULL DEFAULT 30;
ALTER TABLE jobs ADD COLUMN max_waiting INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN replace_deadline INTEGER;
