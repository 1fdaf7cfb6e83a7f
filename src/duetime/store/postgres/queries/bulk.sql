-- name: jobs_bulk_stage
-- Bulk registration: rows are streamed with COPY into a transaction-local copy of `jobs`,
-- then moved in one statement; a name that exists already is left alone.
CREATE TEMP TABLE duetime_jobs_in (LIKE jobs INCLUDING DEFAULTS) ON COMMIT DROP;

-- name: jobs_bulk_copy
-- {table}: jobs itself when the names are expected to be new, else the staging table;
-- {columns}: store/postgres/bulk_rows.columns (the text lines it builds).
COPY {table} ({columns}) FROM STDIN;

-- name: jobs_bulk_insert
INSERT INTO jobs SELECT * FROM duetime_jobs_in ON CONFLICT DO NOTHING;
