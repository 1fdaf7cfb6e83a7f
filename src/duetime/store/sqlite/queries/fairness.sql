-- The fair claim and tenant quotas (docs/fairness.md, store/_fairness.py).
--
-- Both claim queries walk the (tenant, queue, priority) groups of scheduled runs with a skip
-- scan over runs_fair (one index probe per group) and read each group's oldest runs in
-- available_at order (LIMIT n): within a group, effective priority never grows with
-- available_at, so a tenant's best n runs are among them. The claim's BEGIN IMMEDIATE
-- transaction makes the claim and the locked step that follows it atomic.

-- The (tenant, queue, priority) groups both claim queries walk, filtered to the claimer's
-- tenant and queues, with each group's tenant weight, quota flag and runs in flight: the
-- CTEs `grp`, `gf` and `g`, included as {{fair_groups}} (store/sqlfile.py). And the end of
-- the three per-group run subqueries (the fair claim's, the locked step's two), included as
-- {{startable_oldest}}: the run's job lets it start (active or completed; paused only for a
-- manual run); oldest first, up to the limit. Indented as in the fair claim: the locked
-- step's copies differ from their hand-written text in indentation only.
-- The claim statements (runs_claim_fair, runs_claim_ids) return {{claimed_columns}} of each
-- run they claimed, in the order duetime.store._rows.CLAIMED_COLUMNS decodes by position.
-- fragment: fair_groups
grp(tenant, queue, priority) AS (
    SELECT * FROM (
        SELECT tenant, queue, priority FROM runs WHERE state = 'scheduled'
        ORDER BY tenant, queue, priority LIMIT 1
    )
    UNION ALL
    -- the next group: a higher priority, else queue, else tenant (three index seeks at most)
    SELECT n.tenant, n.queue, n.priority FROM grp JOIN runs AS n ON n.rowid = coalesce(
        (SELECT rowid FROM runs WHERE state = 'scheduled' AND tenant = grp.tenant
           AND queue = grp.queue AND priority > grp.priority
         ORDER BY tenant, queue, priority LIMIT 1),
        (SELECT rowid FROM runs WHERE state = 'scheduled' AND tenant = grp.tenant
           AND queue > grp.queue
         ORDER BY tenant, queue, priority LIMIT 1),
        (SELECT rowid FROM runs WHERE state = 'scheduled' AND tenant > grp.tenant
         ORDER BY tenant, queue, priority LIMIT 1)
    )
),
gf AS (
    SELECT * FROM grp
    WHERE (:tenant IS NULL OR grp.tenant = :tenant)
      AND (:queues IS NULL OR grp.queue IN (SELECT value FROM json_each(:queues)))
),
g AS MATERIALIZED (
    -- a tenant's runs in flight (up to 1000, through runs_running_tenant) count as rounds it
    -- already had — only counted when several tenants compete, once per group (materialized)
    SELECT gf.*, coalesce(tn.weight, 1) AS weight,
           coalesce(tn.max_in_flight IS NOT NULL OR tn.max_starts_per_second IS NOT NULL, 0)
               AS limited,
           CASE WHEN (SELECT count(DISTINCT tenant) FROM gf) > 1
                THEN (SELECT count(*) FROM (
                          SELECT 1 FROM runs
                          WHERE runs.state = 'running' AND runs.tenant = gf.tenant LIMIT 1000
                      ) AS counted)
                ELSE 0 END AS running
    FROM gf LEFT JOIN tenants tn ON tn.id = gf.tenant
)

-- fragment: claimed_columns
id, job_id, tenant, job_name, task, queue, payload, scheduled_for, available_at, state,
          priority, attempt, max_attempts, token, lease_owner, lease_expires_at, claimed_at,
          started_at, finished_at, trigger, idempotency_key, reason, last_error_class,
          last_error_message, replays, created_at, target, progress, progress_message,
          checkpoint, cancel_requested, result, origin, timeout_s, backoff_base, backoff_factor,
          backoff_cap, retry_rules, delivery, one_shot, retry_from

-- fragment: startable_oldest
EXISTS (
              SELECT 1 FROM jobs
              WHERE jobs.id = runs.job_id
                AND (jobs.status IN ('active', 'completed')
                     OR (jobs.status = 'paused' AND runs.trigger = 'manual')))
        ORDER BY runs.available_at
        LIMIT :limit

-- name: runs_claim_fair
-- Take the batch by rounds of the tenants (weight; runs in flight count as rounds already
-- had), effective priority, available_at, id;
-- claim the runs no quota or overlap key limits (the locked step handles the others). With
-- `only_fast` those are left out altogether: the claim fills what the locked step left.
WITH RECURSIVE {{fair_groups}},
cand AS (
    SELECT c.rowid AS rid, c.id, c.tenant, c.available_at, g.weight, g.running,
           c.concurrency_key IS NULL AND NOT g.limited AS fast,
           CASE WHEN :aging_us > 0
                THEN c.priority * :aging_us
                     + min(max(:now - c.available_at, 0),
                           max((:aging_cap - c.priority) * :aging_us, 0))
                ELSE c.priority END AS eff
    FROM g
    JOIN runs AS c ON NOT (:only_fast AND g.limited) AND c.rowid IN (
        SELECT runs.rowid FROM runs
        WHERE runs.state = 'scheduled' AND runs.tenant = g.tenant AND runs.queue = g.queue
          AND runs.priority = g.priority AND runs.available_at <= :now + CAST(round(:lookahead * 1000000) AS INTEGER)
          AND runs.task IN (SELECT value FROM json_each(:tasks))
          AND (NOT :only_fast OR runs.concurrency_key IS NULL)
          AND {{startable_oldest}}
    )
),
ranked AS (
    SELECT cand.*,
           row_number() OVER (PARTITION BY tenant ORDER BY eff DESC, available_at, id) AS rnk
    FROM cand
),
picked AS (
    SELECT rid, fast FROM ranked
    ORDER BY (running + rnk - 1) * 1.0 / weight, eff DESC, available_at, id
    LIMIT :limit
)
UPDATE runs SET
    state = 'running', token = token + 1, attempt = attempt + 1, lease_owner = :worker_id,
    lease_expires_at = :now + CAST(round(:lease_ttl * 1000000) AS INTEGER), claimed_at = :now, finished_at = NULL,
    started_at = CASE WHEN available_at <= :now THEN :now ELSE NULL END
WHERE rowid IN (SELECT rid FROM picked WHERE fast)
RETURNING {{claimed_columns}};

-- name: runs_claim_locked_candidates
-- The locked step's candidates: every run of a limited tenant, and the runs with an overlap
-- key of the others (through runs_keyed_ready). The store orders them (store/_fairness.py),
-- counts what runs per tenant and key, and decides.
WITH RECURSIVE {{fair_groups}}
SELECT c.id, c.job_id, c.tenant, c.priority, c.available_at, c.concurrency_key, c.trigger,
       g.weight, g.limited, g.running, jobs.overlap_policy, jobs.max_concurrency,
       jobs.max_waiting
FROM g JOIN runs AS c ON c.rowid IN (
    SELECT runs.rowid FROM runs
    WHERE runs.state = 'scheduled' AND runs.tenant = g.tenant AND runs.queue = g.queue
      AND runs.priority = g.priority AND runs.available_at <= :now + CAST(round(:lookahead * 1000000) AS INTEGER)
      AND runs.task IN (SELECT value FROM json_each(:tasks))
      AND {{startable_oldest}}
)
JOIN jobs ON jobs.id = c.job_id
WHERE g.limited
UNION ALL
SELECT c.id, c.job_id, c.tenant, c.priority, c.available_at, c.concurrency_key, c.trigger,
       g.weight, g.limited, g.running, jobs.overlap_policy, jobs.max_concurrency,
       jobs.max_waiting
FROM g JOIN runs AS c ON c.rowid IN (
    SELECT runs.rowid FROM runs INDEXED BY runs_keyed_ready
    WHERE runs.state = 'scheduled' AND runs.concurrency_key IS NOT NULL
      AND runs.tenant = g.tenant AND runs.queue = g.queue AND runs.priority = g.priority
      AND runs.available_at <= :now + CAST(round(:lookahead * 1000000) AS INTEGER)
      AND runs.task IN (SELECT value FROM json_each(:tasks))
      AND {{startable_oldest}}
)
JOIN jobs ON jobs.id = c.job_id
WHERE NOT g.limited;

-- name: tenant_quotas
-- In the claim's transaction: the tenants' limits, start buckets and runs in flight.
SELECT t.id, t.max_in_flight, t.max_starts_per_second, t.bucket_tokens, t.bucket_at,
       (SELECT count(*) FROM runs WHERE runs.state = 'running' AND runs.tenant = t.id)
           AS running
FROM tenants t
WHERE t.id IN (SELECT value FROM json_each(:tenants));

-- name: tenant_buckets_set
-- `tenants` and `tokens`: JSON arrays, element k of one for element k of the other.
UPDATE tenants SET bucket_tokens = json_extract(:tokens, '$[' || i.key || ']'),
    bucket_at = max(coalesce(bucket_at, :now), :now)
FROM json_each(:tenants) AS i
WHERE tenants.id = i.value;

-- name: tenant_limits_upsert
-- Fields passed as NULL keep their value; 0 removes a limit (stored as NULL).
INSERT INTO tenants (
    id, webhook_secret, max_in_flight, max_starts_per_second, weight, created_at,
    max_backfill_runs
)
VALUES (
    :tenant, :secret, nullif(:max_in_flight, 0), nullif(:max_starts_per_second, 0),
    coalesce(:weight, 1), :now, nullif(:max_backfill_runs, 0)
)
ON CONFLICT (id) DO UPDATE SET
    max_in_flight = CASE WHEN :max_in_flight IS NULL THEN tenants.max_in_flight
                         ELSE nullif(:max_in_flight, 0) END,
    max_starts_per_second = CASE
        WHEN :max_starts_per_second IS NULL THEN tenants.max_starts_per_second
        ELSE nullif(:max_starts_per_second, 0) END,
    weight = coalesce(:weight, tenants.weight),
    max_backfill_runs = CASE WHEN :max_backfill_runs IS NULL THEN tenants.max_backfill_runs
                             ELSE nullif(:max_backfill_runs, 0) END
RETURNING *;

-- name: tenant_limits_get
SELECT id, max_in_flight, max_starts_per_second, weight, max_jobs, max_backfill_runs
FROM tenants WHERE id = :tenant;

-- name: tenant_limits_list
SELECT id, max_in_flight, max_starts_per_second, weight, max_jobs, max_backfill_runs
FROM tenants ORDER BY id;

-- name: tenant_stats
-- Due and in-flight runs per tenant and queue (runs_fair and runs_leases).
SELECT tenant, queue,
       sum(state = 'scheduled') AS due,
       min(CASE WHEN state = 'scheduled' THEN available_at END) AS oldest,
       sum(state = 'running') AS in_flight,
       :now AS now
FROM (
    SELECT tenant, queue, state, available_at FROM runs
    WHERE state = 'scheduled' AND available_at <= :now
    UNION ALL
    SELECT tenant, queue, state, available_at FROM runs WHERE state = 'running'
)
GROUP BY tenant, queue
ORDER BY tenant, queue;

-- name: tenant_quota_states
-- Every tenant with a limit (for tenant_stats): limits and start bucket.
SELECT id, max_in_flight, max_starts_per_second, bucket_tokens, bucket_at FROM tenants
WHERE max_in_flight IS NOT NULL OR max_starts_per_second IS NOT NULL;
