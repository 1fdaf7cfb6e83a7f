-- Per-tenant webhook signing secrets (the tenants row is created on first use).

-- name: tenant_secret_get
SELECT webhook_secret FROM tenants WHERE id = :tenant;

-- name: tenant_secret_insert
INSERT INTO tenants (id, webhook_secret, created_at) VALUES (:tenant, :secret, :now)
ON CONFLICT (id) DO NOTHING;
