-- v6: remote workers and the task names they declare belong to their tenant (issue 13).
-- A remote worker is keyed by (tenant, id), never by a "tenant/worker" string alone: tenant
-- names and worker ids may both hold '/', so that string is ambiguous. '' is the installation's
-- own (in-process) workers; a tenant name is never empty.
-- Remote worker rows written before now cannot be told apart by tenant: they are dropped (each
-- remote worker records itself again with its next claim).
DELETE FROM workers WHERE host = 'remote';
ALTER TABLE workers ADD COLUMN tenant text NOT NULL DEFAULT '';
ALTER TABLE workers DROP CONSTRAINT workers_pkey;
ALTER TABLE workers ADD PRIMARY KEY (tenant, id);

-- A task name claimed by a tenant's remote worker is valid for that tenant's jobs only; one
-- served by the installation's workers ('') for every tenant. Names recorded before now stay
-- installation-wide.
ALTER TABLE known_tasks ADD COLUMN tenant text NOT NULL DEFAULT '';
ALTER TABLE known_tasks DROP CONSTRAINT known_tasks_pkey;
ALTER TABLE known_tasks ADD PRIMARY KEY (tenant, task);

-- One open alert incident per (kind, tenant, subject): a task nobody serves is one tenant's
-- incident (its subject the task name), visible only to that tenant.
DROP INDEX alert_incidents_open;
CREATE UNIQUE INDEX alert_incidents_open
    ON alert_incidents (kind, coalesce(tenant, ''), subject) WHERE resolved_at IS NULL;
