-- v15 (issue 16, retries): a job's retry window and error classification, copied onto each
-- run as the other retry settings are (docs/decisions/0017). `retry_rules` is JSON
-- ({"within": seconds, "permanent_on": [...], "retry_on": [...], "permanent_on_status": [...],
-- "retry_on_status": [...]}), NULL when none is set; `retry_from` is where a replayed run's
-- window counts from (NULL: from scheduled_for). Nullable without defaults: no table rewrite.
ALTER TABLE jobs ADD COLUMN retry_rules json;
ALTER TABLE runs ADD COLUMN retry_rules json;
ALTER TABLE runs ADD COLUMN retry_from timestamptz;
