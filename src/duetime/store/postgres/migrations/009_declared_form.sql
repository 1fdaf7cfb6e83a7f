-- v9 (issue 17): a one-shot declared as a delay (`at=timedelta(hours=3)`) keeps that delay, so
-- declaring it again unchanged keeps its stored instant instead of re-arming it (NULL: declared
-- as an instant, another kind of schedule, or before v9).
ALTER TABLE jobs ADD COLUMN declared_delay_us bigint;
-- A job's occurrences written ahead but not fired yet (never started), earliest first: the
-- "next fire" that job reads show (next_occurrence_at, docs/api.md). Small: only runs not started yet.
CREATE INDEX runs_job_unfired ON runs (job_id, scheduled_for)
    WHERE state IN ('scheduled', 'running') AND started_at IS NULL AND trigger = 'schedule';
