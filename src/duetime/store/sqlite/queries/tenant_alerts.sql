-- Where each tenant's alerts go, beside the installation's DUETIME_ALERT_WEBHOOKS (the tenants
-- row is created on first use, like its webhook secret).

-- name: tenant_alert_webhooks_upsert
INSERT INTO tenants (id, webhook_secret, alert_webhooks, created_at)
VALUES (:tenant, :secret, :webhooks, :now)
ON CONFLICT (id) DO UPDATE SET alert_webhooks = excluded.alert_webhooks
RETURNING id, alert_webhooks;

-- name: tenant_alert_webhooks_get
SELECT id, alert_webhooks FROM tenants
WHERE id IN (SELECT value FROM json_each(:tenants)) AND alert_webhooks <> '[]';
