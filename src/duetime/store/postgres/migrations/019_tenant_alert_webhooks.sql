-- v19 (issue 22): where a tenant's alerts go — its own webhook URLs, beside the installation's
-- DUETIME_ALERT_WEBHOOKS. Rolling upgrade: the previous release neither reads nor writes it.
ALTER TABLE tenants ADD COLUMN alert_webhooks jsonb NOT NULL DEFAULT '[]';
