-- Observability: the cluster's queues (metrics gauges, dashboard), recent activity (dashboard
-- charts), what the alert evaluator reads, and alert incidents. Every statement gets an
-- explicit %(now)s (read once from the database clock by the caller).

-- What a delivery attempt of an incident's notice records, the fired or the resolved one
-- (done: reset for the next notice; else count the attempt and when to try again): included
-- as {{delivery_tried}} by incident_delivered_fired and incident_delivered_resolved.
-- fragment: delivery_tried
delivered = CASE WHEN %(done)s THEN '[]'::jsonb ELSE %(delivered)s::jsonb END,
    delivery_attempts = CASE WHEN %(done)s THEN 0 ELSE delivery_attempts + 1 END,
    next_delivery_at = CASE WHEN %(done)s THEN NULL ELSE %(next_at)s::timestamptz END,
    last_delivery_error = %(error)s

-- name: stats_due
SELECT tenant, task, count(*) AS n, min(available_at) AS oldest
FROM runs
WHERE state = 'scheduled' AND available_at <= %(now)s
GROUP BY tenant, task;

-- name: stats_running
SELECT tenant, count(*) AS n FROM runs
WHERE state = 'running' AND started_at IS NOT NULL
GROUP BY tenant;

-- name: stats_dead
SELECT tenant, count(*) AS n FROM runs WHERE state = 'dead' GROUP BY tenant;

-- name: stats_leases_expired
SELECT count(*) AS n FROM runs WHERE state = 'running' AND lease_expires_at < %(now)s;

-- name: stats_jobs_overdue
SELECT count(*) AS n, min(next_fire_at) AS oldest FROM jobs
WHERE status = 'active' AND next_fire_at IS NOT NULL AND next_fire_at <= %(now)s;

-- name: stats_workers_live
SELECT * FROM workers WHERE heartbeat_at > %(live_after)s ORDER BY id;

-- name: stats_nodes_live
SELECT * FROM nodes WHERE heartbeat_at > %(live_after)s ORDER BY id;

-- name: stats_leader
SELECT * FROM leader WHERE name = 'default' AND expires_at > %(now)s;

-- name: timeline_runs
-- Runs that ended succeeded or dead, by bucket of their end, with the fire lag of those that
-- ran at their first attempt in the buckets of duetime._observe.LAG_BOUNDS_MS (-1: none).
SELECT floor(extract(epoch FROM finished_at - %(since)s) / %(step)s)::int AS bucket, state,
    CASE
        WHEN started_at IS NULL OR attempt > 1 THEN -1
        WHEN started_at - scheduled_for <= interval '1 millisecond' THEN 0
        WHEN started_at - scheduled_for <= interval '2 milliseconds' THEN 1
        WHEN started_at - scheduled_for <= interval '5 milliseconds' THEN 2
        WHEN started_at - scheduled_for <= interval '10 milliseconds' THEN 3
        WHEN started_at - scheduled_for <= interval '25 milliseconds' THEN 4
        WHEN started_at - scheduled_for <= interval '50 milliseconds' THEN 5
        WHEN started_at - scheduled_for <= interval '100 milliseconds' THEN 6
        WHEN started_at - scheduled_for <= interval '250 milliseconds' THEN 7
        WHEN started_at - scheduled_for <= interval '500 milliseconds' THEN 8
        WHEN started_at - scheduled_for <= interval '1 second' THEN 9
        WHEN started_at - scheduled_for <= interval '2.5 seconds' THEN 10
        WHEN started_at - scheduled_for <= interval '5 seconds' THEN 11
        WHEN started_at - scheduled_for <= interval '10 seconds' THEN 12
        WHEN started_at - scheduled_for <= interval '30 seconds' THEN 13
        WHEN started_at - scheduled_for <= interval '60 seconds' THEN 14
        ELSE 15
    END AS lag,
    count(*) AS n
FROM runs
WHERE tenant = %(tenant)s AND finished_at >= %(since)s AND state IN ('succeeded', 'dead')
GROUP BY 1, 2, 3;

-- name: timeline_attempts
SELECT floor(extract(epoch FROM finished_at - %(since)s) / %(step)s)::int AS bucket, outcome,
    count(*) AS n
FROM attempts
WHERE tenant = %(tenant)s AND finished_at >= %(since)s
  AND outcome IN ('failed', 'timed_out', 'lost')
GROUP BY 1, 2;

-- name: alert_dead_runs
SELECT id, tenant, job_id, job_name, task, reason, last_error_class, last_error_message,
    finished_at, attempt
FROM runs
WHERE state = 'dead' AND (finished_at >= %(since)s OR id = ANY(%(ids)s::uuid[]))
ORDER BY finished_at
LIMIT %(limit)s;

-- name: alert_sla_jobs
-- Per job with an SLA: the latest occurrence whose window closed (a scheduled run, a skipped
-- range, or a next_fire_at not materialized yet), and whether a run succeeded in its window.
WITH c AS (
    SELECT j.id, j.tenant, j.name, j.sla_s, j.status, j.next_fire_at,
        %(now)s::timestamptz - make_interval(secs => j.sla_s) AS cutoff
    FROM jobs j
    WHERE (j.sla_s IS NOT NULL AND j.status = 'active') OR j.id = ANY(%(ids)s::uuid[])
    ORDER BY j.id
    LIMIT %(limit)s
), d AS (
    SELECT c.*, greatest(
        (
            SELECT max(r.scheduled_for) FROM runs r
            WHERE r.job_id = c.id AND r.trigger = 'schedule' AND r.scheduled_for <= c.cutoff
        ),
        (
            SELECT max(least(s.last_at, c.cutoff)) FROM run_skips s
            WHERE s.job_id = c.id AND s.first_at <= c.cutoff
        ),
        CASE WHEN c.status = 'active' AND c.next_fire_at <= c.cutoff THEN c.next_fire_at END
    ) AS due
    FROM c
)
SELECT d.id, d.tenant, d.name, d.sla_s, d.status, d.due,
    EXISTS (
        SELECT 1 FROM runs s
        WHERE s.job_id = d.id AND s.state = 'succeeded'
          AND s.scheduled_for >= d.due
          AND s.scheduled_for <= d.due + make_interval(secs => d.sla_s)
          AND s.finished_at <= d.due + make_interval(secs => d.sla_s)
    ) AS met
FROM d;

-- name: alert_running
-- Runs executing since before %(before)s (or asked for by id), with their job's expected
-- duration and how many of their attempts lost their lease.
SELECT r.id, r.tenant, r.job_id, r.job_name, r.task, r.started_at, r.attempt,
    j.expected_duration_s,
    (SELECT count(*) FROM attempts a WHERE a.run_id = r.id AND a.outcome = 'lost') AS lost
FROM runs r JOIN jobs j ON j.id = r.job_id
WHERE r.state = 'running' AND r.started_at IS NOT NULL
  AND (r.started_at <= %(before)s OR r.id = ANY(%(ids)s::uuid[]))
ORDER BY r.started_at
LIMIT %(limit)s;

-- name: alert_lost_leases
-- Unfinished runs whose lease was lost at least %(min_lost)s times since %(since)s.
SELECT r.id, r.tenant, r.job_id, r.job_name, r.task,
    coalesce(r.started_at, r.available_at) AS started_at, r.attempt,
    j.expected_duration_s, count(*) AS lost
FROM attempts a
JOIN runs r ON r.id = a.run_id
JOIN jobs j ON j.id = r.job_id
WHERE a.outcome = 'lost' AND a.finished_at >= %(since)s AND r.state IN ('scheduled', 'running')
GROUP BY r.id, j.id
HAVING count(*) >= %(min_lost)s
LIMIT %(limit)s;

-- name: alert_durations
-- The last 20 successful runs of a job (their last attempt's duration).
SELECT started_at, finished_at FROM runs
WHERE job_id = %(job_id)s AND state = 'succeeded' AND started_at IS NOT NULL
ORDER BY scheduled_for DESC
LIMIT 20;

-- name: incident_insert
INSERT INTO alert_incidents (
    id, kind, subject, tenant, job_id, run_id, summary, details, opened_at, leader_term
) VALUES (
    %(id)s, %(kind)s, %(subject)s, %(tenant)s, %(job_id)s, %(run_id)s, %(summary)s,
    %(details)s::json, %(now)s, %(term)s
)
ON CONFLICT DO NOTHING
RETURNING *;

-- name: incident_resolve
UPDATE alert_incidents SET
    resolved_at = %(now)s, resolution = %(resolution)s,
    delivered = CASE WHEN fired_sent_at IS NULL THEN delivered ELSE '[]'::jsonb END,
    delivery_attempts = CASE WHEN fired_sent_at IS NULL THEN delivery_attempts ELSE 0 END,
    next_delivery_at = CASE WHEN fired_sent_at IS NULL THEN next_delivery_at END
WHERE id = %(id)s AND resolved_at IS NULL
RETURNING *;

-- name: incidents_list
SELECT * FROM alert_incidents
WHERE (%(firing)s::boolean IS NULL OR (resolved_at IS NULL) = %(firing)s::boolean)
  AND (%(tenants)s::text[] IS NULL OR coalesce(tenant, '') = ANY(%(tenants)s::text[]))
ORDER BY opened_at DESC, id
LIMIT %(limit)s;

-- name: incidents_unsent
SELECT * FROM alert_incidents
WHERE (fired_sent_at IS NULL OR (resolved_at IS NOT NULL AND resolved_sent_at IS NULL))
  AND (next_delivery_at IS NULL OR next_delivery_at <= %(before)s)
ORDER BY opened_at, id
LIMIT %(limit)s;

-- name: incident_delivered_fired
UPDATE alert_incidents SET
    fired_sent_at = CASE WHEN %(done)s THEN %(now)s::timestamptz END,
    {{delivery_tried}}
WHERE id = %(id)s AND fired_sent_at IS NULL;

-- name: incident_delivered_resolved
UPDATE alert_incidents SET
    resolved_sent_at = CASE WHEN %(done)s THEN %(now)s::timestamptz END,
    {{delivery_tried}}
WHERE id = %(id)s AND fired_sent_at IS NOT NULL AND resolved_at IS NOT NULL
  AND resolved_sent_at IS NULL;

-- name: incidents_prune
DELETE FROM alert_incidents WHERE id IN (
    SELECT id FROM alert_incidents
    WHERE resolved_at < %(before)s AND resolved_sent_at IS NOT NULL
    LIMIT %(limit)s
);

-- name: depth_samples_record
-- Queue depth at %(now)s: one sample per tenant with runs scheduled, running or dead, and the
-- cluster's total under tenant '' (written even when all zeros: every tenant's series is read
-- at those instants, see depth_samples_list).
INSERT INTO queue_depth_samples (tenant, at, due, running, dead)
WITH c AS (
    SELECT tenant,
        count(*) FILTER (WHERE state = 'scheduled' AND available_at <= %(now)s) AS due,
        count(*) FILTER (WHERE state = 'running' AND started_at IS NOT NULL) AS running,
        count(*) FILTER (WHERE state = 'dead') AS dead
    FROM runs
    WHERE state IN ('scheduled', 'running', 'dead')
    GROUP BY tenant
)
SELECT tenant, %(now)s::timestamptz, due, running, dead FROM c
UNION ALL
SELECT '', %(now)s::timestamptz, coalesce(sum(due), 0), coalesce(sum(running), 0),
    coalesce(sum(dead), 0)
FROM c
ON CONFLICT DO NOTHING;

-- name: depth_samples_list
-- A tenant's queue depth at every sampling instant since %(since)s, oldest first (zero where
-- it had no run scheduled, running or dead).
SELECT t.at, coalesce(s.due, 0) AS due, coalesce(s.running, 0) AS running,
    coalesce(s.dead, 0) AS dead
FROM queue_depth_samples t
LEFT JOIN queue_depth_samples s ON s.tenant = %(tenant)s AND s.at = t.at
WHERE t.tenant = '' AND t.at >= %(since)s
ORDER BY t.at;

-- name: depth_samples_prune
DELETE FROM queue_depth_samples WHERE at < %(before)s;

-- name: runs_last_workers
-- The worker of each run's latest attempt (runs of the tenant among %(ids)s), for run lists.
SELECT DISTINCT ON (run_id) run_id, worker_id FROM attempts
WHERE tenant = %(tenant)s AND run_id = ANY(%(ids)s::uuid[])
ORDER BY run_id, token DESC;
