-- Signing-secret rotation and reported circuit breakers (issue 19; docs/decisions/0027).

-- name: tenant_signing_secrets_get
-- The current secret, and the previous one while its overlap window lasts.
SELECT webhook_secret,
       CASE WHEN webhook_secret_previous_until > coalesce(%(now)s::timestamptz, clock_timestamp())
            THEN webhook_secret_previous END AS previous
FROM tenants WHERE id = %(tenant)s;

-- name: tenant_secret_rotate
-- The current secret becomes the previous one (an older previous one is dropped) until
-- now + overlap (microseconds).
UPDATE tenants SET
    webhook_secret_previous = webhook_secret,
    webhook_secret = %(secret)s,
    webhook_secret_previous_until =
        coalesce(%(now)s::timestamptz, clock_timestamp())
        + make_interval(secs => %(overlap)s::bigint / 1e6)
WHERE id = %(tenant)s
RETURNING webhook_secret_previous_until AS previous_until;

-- name: breakers_forget
DELETE FROM target_breakers WHERE worker_id = %(worker_id)s;

-- name: breakers_insert
INSERT INTO target_breakers (worker_id, key, state, failures, opened_at, retry_at, updated_at)
SELECT %(worker_id)s, b.key, b.state, b.failures, b.opened_at, b.retry_at,
       coalesce(%(now)s::timestamptz, clock_timestamp())
FROM jsonb_to_recordset(%(breakers)s::jsonb) AS b(
    key text, state text, failures int, opened_at timestamptz, retry_at timestamptz
);

-- name: breakers_list
-- Breakers of live installation workers (a dead worker's rows are not shown; its next
-- report, or none, removes them: breakers_prune).
SELECT b.worker_id, b.key, b.state, b.failures, b.opened_at, b.retry_at, b.updated_at
FROM target_breakers b
JOIN workers w ON w.tenant = '' AND w.id = b.worker_id
ORDER BY b.opened_at, b.key, b.worker_id;

-- name: breakers_prune
DELETE FROM target_breakers b
WHERE NOT EXISTS (SELECT 1 FROM workers w WHERE w.tenant = '' AND w.id = b.worker_id);
