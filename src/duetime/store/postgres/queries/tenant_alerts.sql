-- Where each tenant's alerts go, beside the installation's DUETIME_ALERT_WEBHOOKS (the tenants
-- row is created on first use, like its webhook secret).

-- name: tenant_alert_webhooks_upsert
INSERT INTO tenants (id, webhook_secret, alert_webhooks, created_at)
VALUES (%(tenant)s, %(secret)s, %(webhooks)s::jsonb, coalesce(%(now)s, clock_timestamp()))
ON CONFLICT (id) DO UPDATE SET alert_webhooks = excluded.alert_webhooks
RETURNING id, alert_webhooks;

-- name: tenant_alert_webhooks_get
SELECT id, alert_webhooks FROM tenants
WHERE id = ANY(%(tenants)s::text[]) AND alert_webhooks <> '[]'::jsonb;
