-- v16 (issue 16, every; decision 0018): an `every` in calendar units ("1 day", "2 weeks",
-- "1 month") keeps the anchor's wall time in the job's zone. `every_count` and `every_unit`
-- hold it (then `every_us` is NULL); both NULL for a fixed duration (`every_us`), another
-- kind of schedule, or a row from before v16, which therefore means what it meant.
-- Nullable without defaults: no table rewrite.
ALTER TABLE jobs ADD COLUMN every_count integer CHECK (every_count IS NULL OR every_count >= 1);
ALTER TABLE jobs ADD COLUMN every_unit text CHECK (every_unit IN ('day', 'week', 'month'));
