-- Observability: the cluster's queues (metrics gauges, dashboard), recent activity (dashboard
-- charts), what the alert evaluator reads, and alert incidents. Instants are microseconds.

-- What a delivery attempt of an incident's notice records, the fired or the resolved one
-- (done: reset for the next notice; else count the attempt and when to try again): included
-- as {{delivery_tried}} by incident_delivered_fired and incident_delivered_resolved.
-- fragment: delivery_tried
delivered = CASE WHEN :done THEN '[]' ELSE :delivered END,
    delivery_attempts = CASE WHEN :done THEN 0 ELSE delivery_attempts + 1 END,
    next_delivery_at = CASE WHEN :done THEN NULL ELSE :next_at END,
    last_delivery_error = :error

-- name: stats_due
SELECT tenant, task, count(*) AS n, min(available_at) AS oldest
FROM runs
WHERE state = 'scheduled' AND available_at <= :now
GROUP BY tenant, task;

-- name: stats_running
SELECT tenant, count(*) AS n FROM runs
WHERE state = 'running' AND started_at IS NOT NULL
GROUP BY tenant;

-- name: stats_dead
SELECT tenant, count(*) AS n FROM runs WHERE state = 'dead' GROUP BY tenant;

-- name: stats_leases_expired
SELECT count(*) AS n FROM runs WHERE state = 'running' AND lease_expires_at < :now;

-- name: stats_jobs_overdue
SELECT count(*) AS n, min(next_fire_at) AS oldest FROM jobs
WHERE status = 'active' AND next_fire_at IS NOT NULL AND next_fire_at <= :now;

-- name: stats_workers_live
SELECT * FROM workers WHERE heartbeat_at > :live_after ORDER BY id;

-- name: stats_nodes_live
SELECT * FROM nodes WHERE heartbeat_at > :live_after ORDER BY id;

-- name: stats_leader
SELECT * FROM leader WHERE name = 'default' AND expires_at > :now;

-- name: timeline_runs
-- Runs that ended succeeded or dead, by bucket of their end, with the fire lag of those that
-- ran at their first attempt in the buckets of duetime._observe.LAG_BOUNDS_MS (-1: none).
SELECT (finished_at - :since) / max(1, CAST(:step * 1000000 AS INTEGER)) AS bucket, state,
    CASE
        WHEN started_at IS NULL OR attempt > 1 THEN -1
        WHEN started_at - scheduled_for <= 1000 THEN 0
        WHEN started_at - scheduled_for <= 2000 THEN 1
        WHEN started_at - scheduled_for <= 5000 THEN 2
        WHEN started_at - scheduled_for <= 10000 THEN 3
        WHEN started_at - scheduled_for <= 25000 THEN 4
        WHEN started_at - scheduled_for <= 50000 THEN 5
        WHEN started_at - scheduled_for <= 100000 THEN 6
        WHEN started_at - scheduled_for <= 250000 THEN 7
        WHEN started_at - scheduled_for <= 500000 THEN 8
        WHEN started_at - scheduled_for <= 1000000 THEN 9
        WHEN started_at - scheduled_for <= 2500000 THEN 10
        WHEN started_at - scheduled_for <= 5000000 THEN 11
        WHEN started_at - scheduled_for <= 10000000 THEN 12
        WHEN started_at - scheduled_for <= 30000000 THEN 13
        WHEN started_at - scheduled_for <= 60000000 THEN 14
        ELSE 15
    END AS lag,
    count(*) AS n
FROM runs
WHERE tenant = :tenant AND finished_at >= :since AND state IN ('succeeded', 'dead')
GROUP BY 1, 2, 3;

-- name: timeline_attempts
SELECT (finished_at - :since) / max(1, CAST(:step * 1000000 AS INTEGER)) AS bucket, outcome, count(*) AS n
FROM attempts
WHERE tenant = :tenant AND finished_at >= :since AND outcome IN ('failed', 'timed_out', 'lost')
GROUP BY 1, 2;

-- name: alert_dead_runs
SELECT id, tenant, job_id, job_name, task, reason, last_error_class, last_error_message,
    finished_at, attempt
FROM runs
WHERE state = 'dead'
  AND (finished_at >= :since OR id IN (SELECT value FROM json_each(:ids)))
ORDER BY finished_at
LIMIT :limit;

-- name: alert_sla_jobs
-- Per job with an SLA: the latest occurrence whose window closed (a scheduled run, a skipped
-- range, or a next_fire_at not materialized yet), and whether a run succeeded in its window.
WITH c AS (
    SELECT j.id, j.tenant, j.name, j.sla_s, j.status, j.next_fire_at,
        :now - CAST(j.sla_s * 1000000 AS INTEGER) AS cutoff
    FROM jobs j
    WHERE (j.sla_s IS NOT NULL AND j.status = 'active')
       OR j.id IN (SELECT value FROM json_each(:ids))
    ORDER BY j.id
    LIMIT :limit
), d AS (
    SELECT c.*, max(
        coalesce((
            SELECT max(r.scheduled_for) FROM runs r
            WHERE r.job_id = c.id AND r.trigger = 'schedule' AND r.scheduled_for <= c.cutoff
        ), -1),
        coalesce((
            SELECT max(min(s.last_at, c.cutoff)) FROM run_skips s
            WHERE s.job_id = c.id AND s.first_at <= c.cutoff
        ), -1),
        CASE WHEN c.status = 'active' AND c.next_fire_at <= c.cutoff THEN c.next_fire_at
             ELSE -1 END
    ) AS due
    FROM c
)
SELECT d.id, d.tenant, d.name, d.sla_s, d.status, d.due,
    EXISTS (
        SELECT 1 FROM runs s
        WHERE s.job_id = d.id AND s.state = 'succeeded'
          AND s.scheduled_for >= d.due
          AND s.scheduled_for <= d.due + CAST(d.sla_s * 1000000 AS INTEGER)
          AND s.finished_at <= d.due + CAST(d.sla_s * 1000000 AS INTEGER)
    ) AS met
FROM d;

-- name: alert_running
-- Runs executing since before :before (or asked for by id), with their job's expected
-- duration and how many of their attempts lost their lease.
SELECT r.id, r.tenant, r.job_id, r.job_name, r.task, r.started_at, r.attempt,
    j.expected_duration_s,
    (SELECT count(*) FROM attempts a WHERE a.run_id = r.id AND a.outcome = 'lost') AS lost
FROM runs r JOIN jobs j ON j.id = r.job_id
WHERE r.state = 'running' AND r.started_at IS NOT NULL
  AND (r.started_at <= :before OR r.id IN (SELECT value FROM json_each(:ids)))
ORDER BY r.started_at
LIMIT :limit;

-- name: alert_lost_leases
-- Unfinished runs whose lease was lost at least :min_lost times since :since.
SELECT r.id, r.tenant, r.job_id, r.job_name, r.task,
    coalesce(r.started_at, r.available_at) AS started_at, r.attempt,
    j.expected_duration_s, count(*) AS lost
FROM attempts a
JOIN runs r ON r.id = a.run_id
JOIN jobs j ON j.id = r.job_id
WHERE a.outcome = 'lost' AND a.finished_at >= :since AND r.state IN ('scheduled', 'running')
GROUP BY r.id
HAVING count(*) >= :min_lost
LIMIT :limit;

-- name: alert_durations
-- The last 20 successful runs of a job (their last attempt's duration).
SELECT started_at, finished_at FROM runs
WHERE job_id = :job_id AND state = 'succeeded' AND started_at IS NOT NULL
ORDER BY scheduled_for DESC
LIMIT 20;

-- name: incident_insert
INSERT INTO alert_incidents (
    id, kind, subject, tenant, job_id, run_id, summary, details, opened_at, leader_term
) VALUES (
    :id, :kind, :subject, :tenant, :job_id, :run_id, :summary, :details, :now, :term
)
ON CONFLICT DO NOTHING
RETURNING *;

-- name: incident_resolve
UPDATE alert_incidents SET
    resolved_at = :now, resolution = :resolution,
    delivered = CASE WHEN fired_sent_at IS NULL THEN delivered ELSE '[]' END,
    delivery_attempts = CASE WHEN fired_sent_at IS NULL THEN delivery_attempts ELSE 0 END,
    next_delivery_at = CASE WHEN fired_sent_at IS NULL THEN next_delivery_at ELSE NULL END
WHERE id = :id AND resolved_at IS NULL
RETURNING *;

-- name: incidents_list
SELECT * FROM alert_incidents
WHERE (:firing IS NULL OR (resolved_at IS NULL) = :firing)
  AND (:tenants IS NULL OR coalesce(tenant, '') IN (SELECT value FROM json_each(:tenants)))
ORDER BY opened_at DESC, id
LIMIT :limit;

-- name: incidents_unsent
SELECT * FROM alert_incidents
WHERE (fired_sent_at IS NULL OR (resolved_at IS NOT NULL AND resolved_sent_at IS NULL))
  AND coalesce(next_delivery_at, 0) <= :before
ORDER BY opened_at, id
LIMIT :limit;

-- name: incident_delivered_fired
UPDATE alert_incidents SET
    fired_sent_at = CASE WHEN :done THEN :now ELSE NULL END,
    {{delivery_tried}}
WHERE id = :id AND fired_sent_at IS NULL;

-- name: incident_delivered_resolved
UPDATE alert_incidents SET
    resolved_sent_at = CASE WHEN :done THEN :now ELSE NULL END,
    {{delivery_tried}}
WHERE id = :id AND fired_sent_at IS NOT NULL AND resolved_at IS NOT NULL
  AND resolved_sent_at IS NULL;

-- name: incidents_prune
DELETE FROM alert_incidents WHERE id IN (
    SELECT id FROM alert_incidents
    WHERE resolved_at < :before AND resolved_sent_at IS NOT NULL
    LIMIT :limit
);

-- name: depth_samples_record
-- Queue depth at :now: one sample per tenant with runs scheduled, running or dead, and the
-- cluster's total under tenant '' (written even when all zeros: every tenant's series is read
-- at those instants, see depth_samples_list). "WHERE true": SQLite's upsert after a SELECT.
INSERT INTO queue_depth_samples (tenant, at, due, running, dead)
WITH c AS (
    SELECT tenant,
        count(CASE WHEN state = 'scheduled' AND available_at <= :now THEN 1 END) AS due,
        count(CASE WHEN state = 'running' AND started_at IS NOT NULL THEN 1 END) AS running,
        count(CASE WHEN state = 'dead' THEN 1 END) AS dead
    FROM runs
    WHERE state IN ('scheduled', 'running', 'dead')
    GROUP BY tenant
)
SELECT tenant, :now, due, running, dead FROM c
UNION ALL
SELECT '', :now, coalesce(sum(due), 0), coalesce(sum(running), 0), coalesce(sum(dead), 0)
FROM c WHERE true
ON CONFLICT DO NOTHING;

-- name: depth_samples_list
-- A tenant's queue depth at every sampling instant since :since, oldest first (zero where it
-- had no run scheduled, running or dead).
SELECT t.at, coalesce(s.due, 0) AS due, coalesce(s.running, 0) AS running,
    coalesce(s.dead, 0) AS dead
FROM queue_depth_samples t
LEFT JOIN queue_depth_samples s ON s.tenant = :tenant AND s.at = t.at
WHERE t.tenant = '' AND t.at >= :since
ORDER BY t.at;

-- name: depth_samples_prune
DELETE FROM queue_depth_samples WHERE at < :before;

-- name: runs_last_workers
-- The worker of each run's latest attempt (runs of the tenant among :ids), for run lists.
SELECT a.run_id, a.worker_id FROM attempts a
WHERE a.tenant = :tenant AND a.run_id IN (SELECT value FROM json_each(:ids))
  AND a.token = (SELECT max(b.token) FROM attempts b WHERE b.run_id = a.run_id);
