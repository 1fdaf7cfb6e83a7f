-- Exclusion calendars (issue 24): a tenant's named calendars, and what backfills need of runs.

-- name: calendar_put
INSERT INTO calendars (tenant, name, description, rules, created_at, updated_at)
VALUES (:tenant, :name, :description, :rules, :now, :now)
ON CONFLICT (tenant, name) DO UPDATE SET
    description = excluded.description, rules = excluded.rules, updated_at = excluded.updated_at
RETURNING *;

-- name: calendar_get
SELECT * FROM calendars WHERE tenant = :tenant AND name = :name;

-- name: calendars_list
SELECT * FROM calendars WHERE tenant = :tenant ORDER BY name;

-- name: calendars_by_key
-- The calendars of (tenants[i], names[i]) pairs, for one batch of the scheduler.
SELECT c.* FROM calendars c
JOIN json_each(:tenants) AS t
JOIN json_each(:names) AS n ON n.key = t.key
WHERE c.tenant = t.value AND c.name = n.value;

-- name: calendar_users
-- Names of the tenant's jobs that name the calendar (`pattern`: its name quoted, for LIKE).
SELECT name FROM jobs
WHERE tenant = :tenant AND calendars LIKE :pattern ESCAPE '\'
ORDER BY name LIMIT 5;

-- name: calendar_delete
DELETE FROM calendars WHERE tenant = :tenant AND name = :name;

-- name: runs_occurrences
-- The instants of a job's scheduled runs between since and until (both included).
SELECT scheduled_for FROM runs
WHERE job_id = :job_id AND idempotency_key IS NULL
  AND scheduled_for >= :since AND scheduled_for <= :until;

-- name: runs_origin_states
SELECT state, count(*) AS n FROM runs
WHERE tenant = :tenant AND job_id = :job_id AND origin = :origin
GROUP BY state;
