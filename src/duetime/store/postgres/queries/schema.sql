-- The schema's own bookkeeping: which migrations were applied (migrate itself is per dialect).

-- name: migrations_table
-- A row when duetime_migrations exists (it does not before the first migration).
SELECT 1 AS t WHERE to_regclass('duetime_migrations') IS NOT NULL;

-- name: schema_version
-- The newest migration applied (NULL when the table is empty); read once migrations_table
-- answered a row.
SELECT max(version) AS v FROM duetime_migrations;
