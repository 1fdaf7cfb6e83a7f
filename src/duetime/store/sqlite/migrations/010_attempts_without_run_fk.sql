-- v10 (issue 15): no foreign key from attempts to runs, and retention that skips dead letters
-- without reading them (docs/decisions/0010-no-foreign-key-from-attempts.md).
--
-- attempts.run_id no longer references runs, as on PostgreSQL (both stores delete the same
-- way: every statement that deletes runs deletes their attempts in the same transaction).
-- SQLite cannot drop a constraint: the table is rebuilt (renamed aside, created again
-- without the reference, copied, the old one dropped, its index made again). The whole
-- migration is one transaction: readers see the old table or the new one.
--
-- runs_finished leads with the state: retention never prunes a dead letter (state `dead`)
-- and reaches the prunable states' old runs without reading the dead letters kept below the
-- cut.
--
-- Rolling upgrade: the rebuild holds the write lock while attempts are copied (writers wait
-- for it, they do not fail); the previous release keeps working on this schema, except that
-- its deletes of runs would leave their attempts behind (see the decision record).
ALTER TABLE attempts RENAME TO attempts_v9;
CREATE TABLE attempts (
    run_id        TEXT NOT NULL,
    token         INTEGER NOT NULL,
    job_id        TEXT NOT NULL,
    tenant        TEXT NOT NULL,
    number        INTEGER NOT NULL,
    worker_id     TEXT NOT NULL,
    claimed_at    INTEGER NOT NULL,
    started_at    INTEGER,
    finished_at   INTEGER NOT NULL,
    outcome       TEXT NOT NULL CHECK (outcome IN ('succeeded', 'failed', 'lost', 'stale', 'timed_out', 'cancelled')),
    error_class   TEXT,
    error_message TEXT,
    traceback     TEXT,
    PRIMARY KEY (run_id, token)
);
INSERT INTO attempts (
    run_id, token, job_id, tenant, number, worker_id, claimed_at, started_at, finished_at,
    outcome, error_class, error_message, traceback
)
SELECT run_id, token, job_id, tenant, number, worker_id, claimed_at, started_at, finished_at,
       outcome, error_class, error_message, traceback
FROM attempts_v9;
DROP TABLE attempts_v9;
CREATE INDEX attempts_finished ON attempts (finished_at);
DROP INDEX runs_finished;
CREATE INDEX runs_finished ON runs (state, finished_at) WHERE finished_at IS NOT NULL;
