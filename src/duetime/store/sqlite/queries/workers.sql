-- name: worker_upsert
INSERT INTO workers (id, host, pid, tasks, queues, started_at, heartbeat_at)
VALUES (:id, :host, :pid, :tasks, :queues, :started_at, :now)
ON CONFLICT (id) DO UPDATE SET
    tasks = excluded.tasks, queues = excluded.queues, heartbeat_at = excluded.heartbeat_at;

-- name: known_task_upsert
INSERT INTO known_tasks (task, last_seen_at) VALUES (:task, :now)
ON CONFLICT (task) DO UPDATE SET last_seen_at = excluded.last_seen_at;

-- name: worker_heartbeat
UPDATE workers SET heartbeat_at = :now WHERE id = :id;

-- name: worker_delete
DELETE FROM workers WHERE id = :id;

-- name: workers_list
SELECT * FROM workers ORDER BY started_at;

-- name: tasks_known
SELECT task FROM known_tasks WHERE task IN (SELECT value FROM json_each(:tasks));
