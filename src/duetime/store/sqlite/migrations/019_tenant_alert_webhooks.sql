-- v19 (issue 22): where a tenant's alerts go (see PostgreSQL's migration): a JSON array of URLs.
ALTER TABLE tenants ADD COLUMN alert_webhooks TEXT NOT NULL DEFAULT '[]';
