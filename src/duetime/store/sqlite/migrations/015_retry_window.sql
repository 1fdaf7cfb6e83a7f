-- v15 (issue 16, retries): a job's retry window and error classification, copied onto each
-- run as the other retry settings are (docs/decisions/0017). `retry_rules` is JSON text
-- ({"within": seconds, "permanent_on": [...], "retry_on": [...], "permanent_on_status": [...],
-- "retry_on_status": [...]}), NULL when none is set; `retry_from` (microseconds) is where a
-- replayed run's window counts from (NULL: from scheduled_for).
ALTER TABLE jobs ADD COLUMN retry_rules TEXT;
ALTER TABLE runs ADD COLUMN retry_rules TEXT;
ALTER TABLE runs ADD COLUMN retry_from INTEGER;
