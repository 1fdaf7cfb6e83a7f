-- v22 (issue 24, calendars and backfill; see the PostgreSQL migration): named exclusion
-- calendars per tenant, the calendars a job names and its business-day shift, a run's origin
-- and a tenant's cap on the runs one backfill may create. Instants are integer microseconds.
CREATE TABLE calendars (
    tenant      TEXT NOT NULL,
    name        TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    rules       TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (tenant, name)
);
ALTER TABLE jobs ADD COLUMN calendars TEXT;
ALTER TABLE jobs ADD COLUMN calendar_shift TEXT
    CHECK (calendar_shift IS NULL
           OR calendar_shift IN ('next_business_day', 'previous_business_day'));
ALTER TABLE runs ADD COLUMN origin TEXT CHECK (origin IS NULL OR origin IN ('backfill'));
ALTER TABLE tenants ADD COLUMN max_backfill_runs INTEGER
    CHECK (max_backfill_runs IS NULL OR max_backfill_runs >= 1);
