-- Transactional enqueue (store/postgres/enlisted.py, docs/decisions/0024): duetime's
-- statements on a caller's connection, in its transaction, in duetime's schema.

-- name: enlist_home
-- Where the app's own pool finds duetime's tables (the first existing schema of its search
-- path) and in which database.
SELECT current_schema() AS schema, current_database() AS db;

-- name: enlist_enter
-- Switch the caller's transaction to duetime's schema (until the transaction ends, or
-- enlist_leave), answering the caller's search path and database. MATERIALIZED: the old value
-- is read before set_config changes it.
WITH s AS MATERIALIZED (SELECT current_setting('search_path') AS old)
SELECT s.old, current_database() AS db, set_config('search_path', %(path)s, true) AS path
FROM s;

-- name: enlist_leave
-- Put the caller's search path back.
SELECT set_config('search_path', %(path)s, true) AS path;
