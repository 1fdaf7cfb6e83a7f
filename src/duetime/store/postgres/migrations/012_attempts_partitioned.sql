-- v12 (issue 15): attempts — the history of every try — are range-partitioned by the week the
-- attempt was claimed (docs/decisions/0015-hot-path-table-design.md). The leader creates
-- the weeks ahead and drops a week whole once it is past retention, keeping the attempts of
-- runs still live or dead letters (moved to the default partition first); retention no longer
-- deletes attempts row by row, except in the default partition.
--
-- requires: nodes stopped
-- Not a rolling upgrade: a unique index of a partitioned table includes its partition key, so
-- the key of an attempt becomes (run_id, token, claimed_at) and the previous release's
-- `ON CONFLICT (run_id, token)` fails on it. `duetime migrate` lists the nodes still
-- heartbeating and waits until they have stopped before it applies this.
--
-- The old table becomes the default partition as it is (no rows copied): its rows stay there,
-- pruned row by row at the retention cut, while new weeks get partitions of their own.
-- Attaching it builds the new key's index over the existing attempts.
ALTER TABLE attempts RENAME TO attempts_default;
ALTER TABLE attempts_default DROP CONSTRAINT attempts_pkey;
ALTER INDEX attempts_finished RENAME TO attempts_default_finished_at;
CREATE TABLE attempts (LIKE attempts_default INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
    PARTITION BY RANGE (claimed_at);
ALTER TABLE attempts ADD CONSTRAINT attempts_pkey PRIMARY KEY (run_id, token, claimed_at);
CREATE INDEX attempts_finished ON attempts (finished_at);
ALTER TABLE attempts ATTACH PARTITION attempts_default DEFAULT;
