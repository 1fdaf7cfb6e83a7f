-- name: jobs_bulk_stage
-- Bulk registration: rows are streamed with COPY into a transaction-local copy of `jobs`,
-- then moved in one statement; a name that exists already is left alone.
CREATE TEMP TABLE duetime_jobs_in (LIKE jobs INCLUDING DEFAULTS) ON COMMIT DROP;

-- name: jobs_bulk_copy
-- {columns}: the column names of store._values.job_values plus status, created_at, updated_at.
COPY duetime_jobs_in ({columns}) FROM STDIN;

-- name: jobs_bulk_insert
INSERT INTO jobs SELECT * FROM duetime_jobs_in ON CONFLICT DO NOTHING;
