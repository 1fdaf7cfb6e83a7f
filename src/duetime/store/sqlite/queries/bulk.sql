-- name: jobs_bulk_insert
-- Bulk registration, run with executemany in one transaction; a name that exists already is
-- left alone. {columns}/{values}: the keys of store._values.job_values (as :name parameters)
-- plus status, created_at, updated_at.
INSERT INTO jobs ({columns}) VALUES ({values}) ON CONFLICT DO NOTHING;
