-- v13 (issue 15): fewer index entries and same-page updates on the hot path
-- (docs/decisions/0015-hot-path-table-design.md). Every claim and completion is an update
-- that adds an entry to each index of runs (no index-free "HOT" update is possible while
-- the state is indexed), and an update whose new version does not fit on its page first logs
-- a lock of the old one and then the whole new version elsewhere.
--
-- - runs keeps 30 % of each page free (fillfactor 70): the next version of a run lands on its
--   page, logged as the bytes that changed.
-- - The job's history index (job_id, scheduled_for) and the occurrence index (job_id,
--   scheduled_for) of runs without an idempotency key become one unique index over
--   (job_id, scheduled_for, idempotency_key), NULLS NOT DISTINCT: the same uniqueness (keyed
--   runs stay unique on (job_id, idempotency_key) too), one entry fewer per update.
-- - No index on lease expiry: the reaper reads the running runs (runs_running_tenant), few
--   however long the history; a heartbeat then changes no indexed column and can stay on
--   its page without new index entries.
-- - Attempts' end instants get a BRIN index (attempts arrive in time order), and a B-tree
--   only on the default partition, which retention prunes row by row, oldest first.
--
-- Rolling: the previous release's statements work on these indexes (its inserts say
-- ON CONFLICT DO NOTHING, without naming an index). Building the new unique index blocks
-- writes to runs until it is built, about a second per million runs.
ALTER TABLE runs SET (fillfactor = 70);
CREATE UNIQUE INDEX runs_job_occurrence_all ON runs (job_id, scheduled_for, idempotency_key)
    NULLS NOT DISTINCT;
DROP INDEX runs_job_occurrence;
DROP INDEX runs_job_history;
ALTER INDEX runs_job_occurrence_all RENAME TO runs_job_occurrence;
DROP INDEX runs_leases;
DROP INDEX attempts_finished;
CREATE INDEX attempts_finished ON attempts USING brin (finished_at);
CREATE INDEX attempts_default_finished ON attempts_default (finished_at);
