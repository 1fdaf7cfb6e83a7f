-- v16 (issue 16, every; decision 0018): an `every` in calendar units ("1 day", "2 weeks",
-- "1 month") keeps the anchor's wall time in the job's zone (see the PostgreSQL migration):
-- `every_count` and `every_unit`, both NULL for a fixed duration (`every_us`) and old rows.
ALTER TABLE jobs ADD COLUMN every_count INTEGER CHECK (every_count IS NULL OR every_count >= 1);
ALTER TABLE jobs ADD COLUMN every_unit TEXT CHECK (every_unit IN ('day', 'week', 'month'));
