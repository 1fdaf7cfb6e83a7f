-- v29 (issue 15): a job's next version lands on its page (docs/decisions/0038, "The job row
-- of a one-shot"). A plain one-shot's row is updated twice, each time outside HOT: the set
-- path clears `next_fire_at` (indexed by jobs_due), the completion of its run sets `status`
-- (named by the predicates of five partial indexes). Every update of a recurring job's
-- `next_fire_at` is one too. With every page full, the new version went to another page,
-- logged whole; jobs now keeps 20 % of each page free (fillfactor 80, as runs keeps 30 %: 013),
-- so it stays on its page, logged as the bytes that changed (a completion's job update: 534 →
-- ~360 B of WAL, 4 → 3 records). Pages written before this keep no room until their rows move.
-- Rolling: a storage parameter only (SHARE UPDATE EXCLUSIVE: reads and writes go on).
ALTER TABLE jobs SET (fillfactor = 80);
