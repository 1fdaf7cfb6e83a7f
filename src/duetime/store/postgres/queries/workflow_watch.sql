-- Watching workflows (docs/observability.md): instance counts for the metrics gauges and the
-- facts of the workflow alerts, across every tenant (leader, metrics scrape).

-- name: workflow_instance_counts
SELECT tenant, workflow, state, count(*) AS n FROM workflow_instances
GROUP BY tenant, workflow, state
ORDER BY tenant, workflow, state;

-- name: workflow_alert_instances
-- Failed instances that ended since failed_since (or whose incident is open: ids), and running
-- instances older than their job's SLA.
SELECT i.id, i.tenant, i.workflow, i.version, i.job_id, j.name AS job_name, j.sla_s, i.state,
       i.reason, i.created_at, i.finished_at
FROM workflow_instances i JOIN jobs j ON j.id = i.job_id
WHERE (i.state = 'failed'
       AND (i.finished_at >= %(failed_since)s OR i.id = ANY(%(ids)s::uuid[])))
   OR (i.state = 'running' AND j.sla_s IS NOT NULL
       AND i.created_at < %(now)s::timestamptz - make_interval(secs => j.sla_s))
ORDER BY i.created_at, i.id
LIMIT %(limit)s;
