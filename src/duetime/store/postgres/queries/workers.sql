-- name: worker_upsert
INSERT INTO workers (id, host, pid, tasks, queues, started_at, heartbeat_at)
VALUES (%(id)s, %(host)s, %(pid)s, %(tasks)s::jsonb, %(queues)s::jsonb, %(started_at)s,
        coalesce(%(now)s::timestamptz, clock_timestamp()))
ON CONFLICT (id) DO UPDATE SET
    tasks = excluded.tasks, queues = excluded.queues, heartbeat_at = excluded.heartbeat_at;

-- name: known_tasks_upsert
INSERT INTO known_tasks (task, last_seen_at)
SELECT unnest(%(tasks)s::text[]), coalesce(%(now)s::timestamptz, clock_timestamp())
ON CONFLICT (task) DO UPDATE SET last_seen_at = excluded.last_seen_at;

-- name: worker_heartbeat
UPDATE workers SET heartbeat_at = coalesce(%(now)s::timestamptz, clock_timestamp())
WHERE id = %(id)s;

-- name: worker_delete
DELETE FROM workers WHERE id = %(id)s;

-- name: workers_list
SELECT * FROM workers ORDER BY started_at;

-- name: tasks_known
SELECT task FROM known_tasks WHERE task = ANY(%(tasks)s::text[]);
