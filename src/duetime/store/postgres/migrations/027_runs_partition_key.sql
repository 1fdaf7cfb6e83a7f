-- v27 (issue 23): every run carries its job's partition key (0-255), the key that
-- `duetime migrate --hash-partitions N` partitions the run tables on
-- (docs/decisions/0033-hash-partitioned-runs.md). New runs get it from their job when they are
-- inserted; the runs of earlier releases keep NULL here (nothing reads the column in the
-- default layout) until a conversion to the partitioned layout fills it from their jobs.
--
-- Rolling: a column without a default (and without a constraint to check) is added without
-- reading or rewriting runs, and the previous release's inserts, which do not name it, leave
-- it NULL. Its values come from jobs.partition_key, which is checked to be 0-255.
ALTER TABLE runs ADD COLUMN partition_key smallint;
