-- API keys: only the SHA-256 of a key's secret is stored; revoked keys stay for the record.
-- A statement that changes a key (revocation; any later change of role, tenant or expiry)
-- must announce it on channel duetime_api_keys: processes cache verified keys until told.

-- name: api_key_insert
INSERT INTO api_keys (id, tenant, role, name, prefix, key_hash, created_at)
VALUES (
    %(id)s, %(tenant)s, %(role)s, %(name)s, %(prefix)s, %(key_hash)s,
    coalesce(%(now)s::timestamptz, clock_timestamp())
)
RETURNING *;

-- name: api_key_get_by_hash
SELECT * FROM api_keys WHERE key_hash = %(key_hash)s AND revoked_at IS NULL;

-- name: api_keys_list
SELECT * FROM api_keys
WHERE (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
  AND (%(include_revoked)s OR revoked_at IS NULL)
ORDER BY created_at, id;

-- name: api_key_revoke
-- Announced to every process that caches verified keys (store/postgres/key_news.py): the
-- notification is delivered when the revocation commits, and never without it.
UPDATE api_keys
SET revoked_at = coalesce(revoked_at, %(now)s::timestamptz, clock_timestamp())
WHERE id = %(id)s AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
RETURNING *, pg_notify('duetime_api_keys', id::text) AS notified;

-- name: api_key_touch
WITH t AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now)
UPDATE api_keys SET last_used_at = t.now
FROM t
WHERE id = %(id)s
  AND (last_used_at IS NULL OR last_used_at < t.now - make_interval(secs => %(every)s));
