-- v10 (issue 15): no foreign key from attempts to runs, and retention that skips dead letters
-- without reading them (docs/decisions/0010-no-foreign-key-from-attempts.md).
--
-- attempts.run_id no longer references runs: its check looked the run up again (a KEY SHARE
-- lock on it) for every attempt the completion statement records, right after that statement
-- updated the same run. What its ON DELETE CASCADE did is done explicitly now: every
-- statement that deletes runs (retention, job delete) deletes their attempts in the same
-- transaction.
--
-- runs_finished leads with the state: retention never prunes a dead letter (state `dead`),
-- and keyed by (state, finished_at) it reaches the prunable states' old runs without reading
-- the dead letters kept below the cut, however many accumulate. Queries by finished_at over
-- a few states (timelines, dead-letter alerts) still use it.
--
-- Rolling upgrade: dropping the constraint takes a brief lock on both tables; rebuilding
-- runs_finished blocks writes to runs (claims and completions wait, they do not fail) while
-- the finished runs are indexed. Workers, schedulers and the API of the previous release keep
-- working on this schema; only its deletes of runs (a retention pass by a leader of the
-- previous release, `jobs delete`) would leave their attempts behind, so upgrade the nodes
-- that may lead before relying on that, as the decision record says.
ALTER TABLE attempts DROP CONSTRAINT attempts_run_id_fkey;
DROP INDEX runs_finished;
CREATE INDEX runs_finished ON runs (state, finished_at) WHERE finished_at IS NOT NULL;
