-- v22 (issue 24, calendars and backfill):
-- `calendars`: a tenant's named exclusion calendars; `rules` is the JSON list of rules
--   (dates, ranges, weekdays, cron windows, public holidays) that schedules/calendars.py reads.
-- `jobs.calendars`: the JSON list of calendar names a job skips (NULL: none);
--   `jobs.calendar_shift`: an excluded occurrence moves to the next or previous business day
--   instead of being skipped (NULL: skipped).
-- `runs.origin`: `backfill` for a run a backfill created (NULL: the scheduler or a trigger).
-- `tenants.max_backfill_runs`: the most runs one backfill of the tenant may create (NULL: no cap).
CREATE TABLE calendars (
    tenant      text NOT NULL,
    name        text NOT NULL,
    description text NOT NULL DEFAULT '',
    rules       jsonb NOT NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (tenant, name)
);
ALTER TABLE jobs ADD COLUMN calendars jsonb;
ALTER TABLE jobs ADD COLUMN calendar_shift text
    CHECK (calendar_shift IS NULL
           OR calendar_shift IN ('next_business_day', 'previous_business_day'));
ALTER TABLE runs ADD COLUMN origin text CHECK (origin IS NULL OR origin IN ('backfill'));
ALTER TABLE tenants ADD COLUMN max_backfill_runs integer
    CHECK (max_backfill_runs IS NULL OR max_backfill_runs >= 1);
