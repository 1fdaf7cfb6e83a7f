-- Workers are keyed by (tenant, id): tenant '' is the installation's own workers, a tenant
-- name that tenant's remote workers (whose ids are only unique within their tenant).

-- name: worker_upsert
INSERT INTO workers (tenant, id, host, pid, tasks, queues, started_at, heartbeat_at)
VALUES (:tenant, :id, :host, :pid, :tasks, :queues, :started_at, :now)
ON CONFLICT (tenant, id) DO UPDATE SET
    tasks = excluded.tasks, queues = excluded.queues, heartbeat_at = excluded.heartbeat_at;

-- name: known_tasks_upsert
INSERT INTO known_tasks (tenant, task, last_seen_at)
SELECT :tenant, value, :now FROM json_each(:tasks) WHERE true  -- WHERE: ON CONFLICT parses
ON CONFLICT (tenant, task) DO UPDATE SET last_seen_at = excluded.last_seen_at;

-- name: worker_heartbeat
UPDATE workers SET heartbeat_at = :now WHERE tenant = :tenant AND id = :id;

-- name: worker_delete
DELETE FROM workers WHERE tenant = :tenant AND id = :id;

-- name: workers_list
SELECT * FROM workers ORDER BY started_at;

-- name: tasks_known
-- Names the installation's workers declared ('') or, with a tenant, that tenant's remote
-- workers did; never another tenant's.
SELECT DISTINCT task FROM known_tasks
WHERE task IN (SELECT value FROM json_each(:tasks)) AND tenant IN ('', :tenant);
