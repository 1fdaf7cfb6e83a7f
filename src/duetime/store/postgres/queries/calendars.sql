-- Exclusion calendars (issue 24): a tenant's named calendars, and what backfills need of runs.

-- name: calendar_put
INSERT INTO calendars (tenant, name, description, rules, created_at, updated_at)
VALUES (
    %(tenant)s, %(name)s, %(description)s, %(rules)s::jsonb,
    coalesce(%(now)s::timestamptz, clock_timestamp()),
    coalesce(%(now)s::timestamptz, clock_timestamp())
)
ON CONFLICT (tenant, name) DO UPDATE SET
    description = excluded.description, rules = excluded.rules, updated_at = excluded.updated_at
RETURNING *;

-- name: calendar_get
SELECT * FROM calendars WHERE tenant = %(tenant)s AND name = %(name)s;

-- name: calendars_list
SELECT * FROM calendars WHERE tenant = %(tenant)s ORDER BY name;

-- name: calendars_by_key
-- The calendars of (tenants[i], names[i]) pairs, for one batch of the scheduler.
SELECT c.* FROM calendars c
JOIN unnest(%(tenants)s::text[], %(names)s::text[]) AS k(tenant, name)
  ON c.tenant = k.tenant AND c.name = k.name;

-- name: calendar_users
-- Names of the tenant's jobs that name the calendar.
SELECT name FROM jobs
WHERE tenant = %(tenant)s AND calendars ? %(name)s
ORDER BY name LIMIT 5;

-- name: calendar_delete
DELETE FROM calendars WHERE tenant = %(tenant)s AND name = %(name)s;

-- name: runs_occurrences
-- The instants of a job's scheduled runs between since and until (both included).
SELECT scheduled_for FROM runs
WHERE job_id = %(job_id)s AND idempotency_key IS NULL
  AND scheduled_for >= %(since)s AND scheduled_for <= %(until)s;

-- name: runs_origin_states
SELECT state, count(*) AS n FROM runs
WHERE tenant = %(tenant)s AND job_id = %(job_id)s AND origin = %(origin)s
GROUP BY state;
