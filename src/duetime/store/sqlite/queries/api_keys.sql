-- API keys: only the SHA-256 of a key's secret is stored; revoked keys stay for the record.

-- name: api_key_insert
INSERT INTO api_keys (id, tenant, role, name, prefix, key_hash, created_at)
VALUES (:id, :tenant, :role, :name, :prefix, :key_hash, :now)
RETURNING *;

-- name: api_key_get_by_hash
SELECT * FROM api_keys WHERE key_hash = :key_hash AND revoked_at IS NULL;

-- name: api_keys_list
SELECT * FROM api_keys
WHERE (:tenant IS NULL OR tenant = :tenant)
  AND (:include_revoked OR revoked_at IS NULL)
ORDER BY created_at, id;

-- name: api_key_revoke
UPDATE api_keys SET revoked_at = coalesce(revoked_at, :now)
WHERE id = :id AND (:tenant IS NULL OR tenant = :tenant)
RETURNING *;

-- name: api_key_touch
UPDATE api_keys SET last_used_at = :now
WHERE id = :id AND (last_used_at IS NULL OR last_used_at < :now - CAST(round(:every * 1000000) AS INTEGER));
