-- v6: remote workers and the task names they declare belong to their tenant (issue 13).
-- A remote worker is keyed by (tenant, id), never by a "tenant/worker" string alone: tenant
-- names and worker ids may both hold '/', so that string is ambiguous. '' is the installation's
-- own (in-process) workers; a tenant name is never empty. SQLite cannot change a primary key:
-- both tables are rebuilt.
-- Remote worker rows written before now cannot be told apart by tenant: they are dropped (each
-- remote worker records itself again with its next claim).
CREATE TABLE workers_v6 (
    id           TEXT NOT NULL,
    host         TEXT NOT NULL,
    pid          INTEGER NOT NULL,
    tasks        TEXT NOT NULL,
    queues       TEXT NOT NULL,
    started_at   INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL,
    tenant       TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (tenant, id)
);
INSERT INTO workers_v6 (id, host, pid, tasks, queues, started_at, heartbeat_at)
SELECT id, host, pid, tasks, queues, started_at, heartbeat_at FROM workers WHERE host <> 'remote';
DROP TABLE workers;
ALTER TABLE workers_v6 RENAME TO workers;

-- A task name claimed by a tenant's remote worker is valid for that tenant's jobs only; one
-- served by the installation's workers ('') for every tenant. Names recorded before now stay
-- installation-wide.
CREATE TABLE known_tasks_v6 (
    task         TEXT NOT NULL,
    last_seen_at INTEGER NOT NULL,
    tenant       TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (tenant, task)
);
INSERT INTO known_tasks_v6 (task, last_seen_at) SELECT task, last_seen_at FROM known_tasks;
DROP TABLE known_tasks;
ALTER TABLE known_tasks_v6 RENAME TO known_tasks;

-- One open alert incident per (kind, tenant, subject): a task nobody serves is one tenant's
-- incident (its subject the task name), visible only to that tenant.
DROP INDEX alert_incidents_open;
CREATE UNIQUE INDEX alert_incidents_open
    ON alert_incidents (kind, coalesce(tenant, ''), subject) WHERE resolved_at IS NULL;
