-- The fair claim and tenant quotas (docs/fairness.md, store/_fairness.py).
--
-- Both claim queries walk the (tenant, queue, priority) groups of scheduled runs with a skip
-- scan over runs_fair (one index probe per group) and read each group's oldest runs in
-- available_at order (an index range scan, LIMIT n): within a group, effective priority never
-- grows with available_at, so a tenant's best n runs are among them. The job's status is a
-- scalar subquery, evaluated per row read, so the planner keeps the ordered index scan.

-- The (tenant, queue, priority) groups both claim queries walk, filtered to the claimer's
-- tenant and queues, with each group's tenant weight, quota flag and runs in flight: the
-- CTEs `groups`, `gf`, `inflight` and `g`, included as {{fair_groups}} (store/sqlfile.py).
-- Every scan in them reads an index entry left behind by a run claimed or finished at most
-- once per claim (docs/decisions/0036: while the xmin horizon is held, each costs a heap
-- visit). And the end of the three per-group run subqueries (the fair claim's, the locked
-- step's two), included as {{startable_oldest}}: the run's job lets it start (active or
-- completed; paused only for a manual run); oldest first. The locked step reads up to its
-- limit of each group and locks them (SKIP LOCKED); the fair claim reads up to each group's
-- bound, locking them too or, in its `wide` form, only the runs it picked.
-- The claim statements (these two, runs_claim_ids) return {{claimed_columns}} of each run
-- they claimed (`r`), in the order duetime.store._rows.CLAIMED_COLUMNS decodes by position,
-- then the fair claim's {{fair_claim_flags}}.
-- fragment: fair_groups
groups AS (
    -- each group with its oldest scheduled run's available_at (the first entry the probe
    -- finds: runs_fair orders a group by it), so the fair claim tells a due group without a
    -- second probe
    (SELECT tenant, queue, priority, available_at AS oldest FROM runs WHERE state = 'scheduled'
     ORDER BY tenant, queue, priority, available_at LIMIT 1)
    UNION ALL
    SELECT n.tenant, n.queue, n.priority, n.available_at FROM groups g, LATERAL (
        SELECT tenant, queue, priority, available_at FROM runs
        WHERE state = 'scheduled' AND (tenant, queue, priority) > (g.tenant, g.queue, g.priority)
        ORDER BY tenant, queue, priority, available_at LIMIT 1
    ) n
),
gf AS (
    SELECT * FROM groups
    WHERE (%(tenant)s::text IS NULL OR groups.tenant = %(tenant)s::text)
      AND (%(queues)s::text[] IS NULL OR groups.queue = ANY(%(queues)s::text[]))
),
inflight AS MATERIALIZED (
    -- a tenant's runs in flight (up to 1000, through runs_running_tenant) count as rounds it
    -- already had — only counted when several tenants compete, and once per tenant, not per
    -- group: while the xmin horizon is held (an ANALYZE, a long transaction) every finished
    -- run leaves an entry in runs_running_tenant that costs a heap visit, and a count per
    -- group read each of them once for each of its tenant's groups (docs/decisions/0036).
    -- One row, the counts by tenant in a jsonb object that `g` looks each group's tenant up
    -- in: a join or a scalar subquery per group may be planned (a generic plan does) as a
    -- scan of every tenant's count for each group, groups × tenants rows (16 million, 0.7 s
    -- of a claim's 0.77 s, with 4,000 tenants of one group each)
    SELECT jsonb_object_agg(d.tenant,
           CASE WHEN (SELECT count(DISTINCT tenant) FROM gf) > 1
                THEN (SELECT count(*) FROM (
                          SELECT 1 FROM runs
                          WHERE runs.state = 'running' AND runs.tenant = d.tenant LIMIT 1000
                      ) AS counted)
                ELSE 0 END) AS running
    FROM (SELECT DISTINCT tenant FROM gf) d
),
g AS MATERIALIZED (
    SELECT gf.*, coalesce(tn.weight, 1) AS weight,
           coalesce(tn.max_in_flight IS NOT NULL OR tn.max_starts_per_second IS NOT NULL, false)
               AS limited,
           coalesce(((SELECT running FROM inflight) ->> gf.tenant)::bigint, 0) AS running
    FROM gf LEFT JOIN tenants tn ON tn.id = gf.tenant
)

-- fragment: startable_oldest
(SELECT jobs.status IN ('active', 'completed')
                      OR (jobs.status = 'paused' AND runs.trigger = 'manual')
               FROM jobs WHERE jobs.id = runs.job_id)
        ORDER BY runs.available_at

-- fragment: fair_claim_candidates
due AS MATERIALIZED (
    -- the groups with a run due within the lookahead: their oldest run is (read by the
    -- groups' probe — a second probe per group would walk the entries of the group's runs
    -- claimed since the xmin horizon again, docs/decisions/0036)
    SELECT g.* FROM g CROSS JOIN t
    WHERE g.oldest <= t.now + make_interval(secs => %(lookahead)s)
),
gb AS (
    -- each group's bound: with %(share)s, what its tenant's weight gives it of the batch among
    -- the tenants with runs due (a tenant's picks can all come from one group); without, the
    -- batch. A group that yields its whole bound is `capped`: it may hold more
    SELECT due.*, CASE WHEN %(share)s::bool
        THEN least(%(limit)s::int, ceil(%(limit)s::int::float8 * due.weight / w.total)::int)
        ELSE %(limit)s::int END AS bound
    FROM due CROSS JOIN (
        SELECT sum(weight) AS total FROM (SELECT DISTINCT tenant, weight FROM due) d
    ) w
),
cand AS (
    SELECT c.id, c.job_id, c.partition_key, c.token, c.tenant, g.queue, c.priority, g.bound,
           c.available_at, g.weight, g.running,
           c.concurrency_key IS NULL AND NOT g.limited AS fast,
           -- a one-shot's run with its job's own key: fast if it is its job's only unfinished
           -- run (`picked` asks duetime_key_alone, migration 028; decision 0038)
           CASE WHEN c.one_shot AND NOT g.limited
                     AND c.concurrency_key = 'job:' || c.job_id::text
                THEN c.concurrency_key END AS alone_key,
           CASE WHEN %(aging_us)s::bigint > 0
                THEN c.priority::bigint * %(aging_us)s::bigint + least(greatest(
                         (extract(epoch FROM t.now - c.available_at) * 1000000)::bigint, 0),
                         greatest((%(aging_cap)s::bigint - c.priority) * %(aging_us)s::bigint, 0))
                ELSE c.priority::bigint END AS eff
    FROM gb g CROSS JOIN t
    CROSS JOIN LATERAL (
        SELECT runs.id, runs.job_id, runs.token, runs.tenant, runs.priority, runs.available_at,
               runs.concurrency_key, runs.one_shot, runs.partition_key
        FROM runs
        WHERE runs.state = 'scheduled' AND runs.tenant = g.tenant AND runs.queue = g.queue
          AND runs.priority = g.priority
          AND runs.available_at <= t.now + make_interval(secs => %(lookahead)s)
          AND runs.task = ANY(%(tasks)s::text[])
          AND (NOT %(only_fast)s::bool OR (runs.concurrency_key IS NULL AND NOT g.limited))

-- fragment: fair_claim_pick
    ) c
),
capped AS (
    SELECT count(*) AS n FROM (
        SELECT 1 FROM cand GROUP BY tenant, queue, priority HAVING count(*) >= min(bound)
    ) x
),
ranked AS (
    SELECT cand.*,
           row_number() OVER (PARTITION BY tenant ORDER BY eff DESC, available_at, id) AS rnk
    FROM cand
),
top AS (
    SELECT id, job_id, partition_key, token, fast, alone_key FROM ranked
    ORDER BY (running + rnk - 1)::float8 / weight, eff DESC, available_at, id
    LIMIT %(limit)s::int
),
picked AS MATERIALIZED (
    -- once per run of the batch: a one-shot's keyed run is claimed here when its key's lock is
    -- free and it is its job's only unfinished run (no overlap to judge); else it is left to
    -- the locked step, as every other keyed run
    SELECT id, token,
           CASE WHEN fast THEN true WHEN alone_key IS NULL THEN false
                ELSE duetime_key_alone(id, job_id, partition_key, alone_key) END AS fast,
           'scheduled'::text AS from_state
    FROM top
)

-- fragment: fair_claim_update
-- (a new attempt is asked nothing: a run a `replace` asked to stop that died and was replayed
-- still carries the request, as runs_claim_ids clears it)
UPDATE runs r SET
    state = 'running', token = r.token + 1, attempt = r.attempt + 1,
    lease_owner = %(worker_id)s, lease_expires_at = t.now + make_interval(secs => %(lease_ttl)s),
    claimed_at = t.now, finished_at = NULL, cancel_requested = false, replace_deadline = NULL,
    started_at = CASE WHEN r.available_at <= t.now THEN t.now ELSE NULL END

-- fragment: fair_claim_flags
(SELECT count(*) FROM picked WHERE NOT picked.fast) AS deferred,
          (SELECT n FROM capped) AS capped,
          (SELECT sum(bound) FROM gb) > 2 * %(limit)s::int AS wide

-- fragment: claimed_columns
r.id, r.job_id, r.tenant, r.job_name, r.task, r.queue, r.payload, r.scheduled_for,
          r.available_at, r.state, r.priority, r.attempt, r.max_attempts, r.token, r.lease_owner,
          r.lease_expires_at, r.claimed_at, r.started_at, r.finished_at, r.trigger,
          r.idempotency_key, r.reason, r.last_error_class, r.last_error_message, r.replays,
          r.created_at, r.target, r.progress, r.progress_message, r.checkpoint,
          r.cancel_requested, r.result, r.origin, r.timeout_s, r.backoff_base, r.backoff_factor,
          r.backoff_cap, r.retry_rules, r.delivery, r.one_shot, r.retry_from

-- name: runs_claim_fair
-- One statement: take the batch by rounds of the tenants (weight; runs in flight count as
-- rounds already had), effective priority, available_at, id; claim the runs no quota or
-- overlap key limits. Runs of limited tenants and runs with an overlap key keep their place
-- in the order but are left to the locked step (`deferred` counts them; it comes with every
-- claimed row) — but a one-shot's run that is its job's only unfinished one (`picked`). With
-- `only_fast` those are left out altogether: the claim fills what the locked step left of the
-- batch. The candidates are locked as they are read (SKIP LOCKED): concurrent claims take
-- different runs. When the groups' bounds add up to many times the batch (`wide`),
-- runs_claim_fair_wide is the cheaper statement.
WITH RECURSIVE t AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now),
{{fair_groups}},
{{fair_claim_candidates}}
          AND {{startable_oldest}}
        LIMIT g.bound
        FOR UPDATE OF runs SKIP LOCKED
{{fair_claim_pick}}
{{fair_claim_update}}
FROM picked, t
WHERE r.id = picked.id AND picked.fast
RETURNING {{claimed_columns}},
          {{fair_claim_flags}};

-- name: runs_claim_fair_wide
-- runs_claim_fair for many groups (many tenants, queues, priorities): the candidates are
-- read without locks and only the picked runs are locked (SKIP LOCKED: one a concurrent
-- claim took is left out of this batch). Locking every candidate would write a lock for
-- many times the batch; but two claims at once may read the same candidates, and the
-- second then gets few — so it is used only while the claims say `wide`.
WITH RECURSIVE t AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now),
{{fair_groups}},
{{fair_claim_candidates}}
          AND {{startable_oldest}}
        LIMIT g.bound
{{fair_claim_pick}},
locked AS (
    -- through the primary key; the state compared with the pick's `from_state`, not a
    -- constant, so no partial index of scheduled runs matches. The token read with the pick
    -- must still be the run's: a run claimed (and handed back or rescheduled) between the
    -- read and this lock is left out, whatever its state has become
    SELECT runs.id FROM runs
    JOIN picked p ON p.id = runs.id AND p.from_state = runs.state AND p.token = runs.token
    WHERE runs.id = ANY(ARRAY(SELECT id FROM picked WHERE fast))
    FOR UPDATE OF runs SKIP LOCKED
)
{{fair_claim_update}}
FROM locked, t
WHERE r.id = locked.id
RETURNING {{claimed_columns}},
          {{fair_claim_flags}};

-- name: runs_claim_locked_candidates
-- The locked step's candidates, locked (SKIP LOCKED): every run of a limited tenant, and the
-- runs with an overlap key of the others (through runs_keyed_ready). The store orders them
-- (store/_fairness.py), takes the advisory locks of their tenants and keys, counts, decides.
WITH RECURSIVE {{fair_groups}},
cand AS (
    SELECT c.*, g.weight, g.limited, g.running FROM g CROSS JOIN LATERAL (
        SELECT runs.id, runs.job_id, runs.tenant, runs.priority, runs.available_at,
               runs.concurrency_key, runs.trigger
        FROM runs
        WHERE runs.state = 'scheduled' AND runs.tenant = g.tenant AND runs.queue = g.queue
          AND runs.priority = g.priority
          AND runs.available_at <= %(now)s + make_interval(secs => %(lookahead)s)
          AND runs.task = ANY(%(tasks)s::text[])
          AND {{startable_oldest}}
        LIMIT %(limit)s
        FOR UPDATE OF runs SKIP LOCKED
    ) c
    WHERE g.limited
    UNION ALL
    SELECT c.*, g.weight, g.limited, g.running FROM g CROSS JOIN LATERAL (
        SELECT runs.id, runs.job_id, runs.tenant, runs.priority, runs.available_at,
               runs.concurrency_key, runs.trigger
        FROM runs
        WHERE runs.state = 'scheduled' AND runs.concurrency_key IS NOT NULL
          AND runs.tenant = g.tenant AND runs.queue = g.queue AND runs.priority = g.priority
          AND runs.available_at <= %(now)s + make_interval(secs => %(lookahead)s)
          AND runs.task = ANY(%(tasks)s::text[])
          AND {{startable_oldest}}
        LIMIT %(limit)s
        FOR UPDATE OF runs SKIP LOCKED
    ) c
    WHERE NOT g.limited
)
-- LATERAL + LIMIT: a primary-key lookup per candidate (a plain join was planned as a hash
-- join over a sequential scan of every job)
SELECT cand.*, j.overlap_policy, j.max_concurrency, j.max_waiting
FROM cand CROSS JOIN LATERAL (
    SELECT jobs.overlap_policy, jobs.max_concurrency, jobs.max_waiting FROM jobs
    WHERE jobs.id = cand.job_id
    LIMIT 1
) j;

-- name: tenant_quotas
-- Under the tenants' advisory locks: their limits, start buckets and runs in flight.
SELECT t.id, t.max_in_flight, t.max_starts_per_second, t.bucket_tokens, t.bucket_at,
       (SELECT count(*) FROM runs WHERE runs.state = 'running' AND runs.tenant = t.id)
           AS running
FROM tenants t
WHERE t.id = ANY(%(tenants)s::text[]);

-- name: tenant_buckets_set
UPDATE tenants t SET bucket_tokens = i.tokens,
    bucket_at = greatest(coalesce(t.bucket_at, %(now)s), %(now)s)
FROM unnest(%(tenants)s::text[], %(tokens)s::float8[]) AS i(id, tokens)
WHERE t.id = i.id;

-- name: tenant_limits_upsert
-- Fields passed as NULL keep their value; 0 removes a limit (stored as NULL).
INSERT INTO tenants (
    id, webhook_secret, max_in_flight, max_starts_per_second, weight, created_at,
    max_backfill_runs
)
VALUES (
    %(tenant)s, %(secret)s, nullif(%(max_in_flight)s::int, 0),
    nullif(%(max_starts_per_second)s::float8, 0), coalesce(%(weight)s::int, 1),
    coalesce(%(now)s::timestamptz, clock_timestamp()), nullif(%(max_backfill_runs)s::int, 0)
)
ON CONFLICT (id) DO UPDATE SET
    max_in_flight = CASE WHEN %(max_in_flight)s::int IS NULL THEN tenants.max_in_flight
                         ELSE nullif(%(max_in_flight)s::int, 0) END,
    max_starts_per_second = CASE
        WHEN %(max_starts_per_second)s::float8 IS NULL THEN tenants.max_starts_per_second
        ELSE nullif(%(max_starts_per_second)s::float8, 0) END,
    weight = coalesce(%(weight)s::int, tenants.weight),
    max_backfill_runs = CASE WHEN %(max_backfill_runs)s::int IS NULL THEN tenants.max_backfill_runs
                             ELSE nullif(%(max_backfill_runs)s::int, 0) END
RETURNING *;

-- name: tenant_limits_get
SELECT id, max_in_flight, max_starts_per_second, weight, max_jobs, max_backfill_runs
FROM tenants WHERE id = %(tenant)s;

-- name: tenant_limits_list
SELECT id, max_in_flight, max_starts_per_second, weight, max_jobs, max_backfill_runs
FROM tenants ORDER BY id;

-- name: tenant_stats
-- Due and in-flight runs per tenant and queue (runs_fair and runs_leases), with the clock.
WITH t AS (SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now),
due AS (
    SELECT tenant, queue, count(*) AS due, min(available_at) AS oldest
    FROM runs, t WHERE state = 'scheduled' AND available_at <= t.now
    GROUP BY tenant, queue
),
running AS (
    SELECT tenant, queue, count(*) AS in_flight FROM runs WHERE state = 'running'
    GROUP BY tenant, queue
)
SELECT coalesce(d.tenant, r.tenant) AS tenant, coalesce(d.queue, r.queue) AS queue,
       coalesce(d.due, 0) AS due, d.oldest, coalesce(r.in_flight, 0) AS in_flight, t.now
FROM due d FULL JOIN running r ON r.tenant = d.tenant AND r.queue = d.queue CROSS JOIN t
ORDER BY 1, 2;

-- name: tenant_quota_states
-- Every tenant with a limit (for tenant_stats): limits and start bucket.
SELECT id, max_in_flight, max_starts_per_second, bucket_tokens, bucket_at FROM tenants
WHERE max_in_flight IS NOT NULL OR max_starts_per_second IS NOT NULL;
