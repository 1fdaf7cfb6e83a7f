-- v24 (issue 19, broker targets; docs/decisions/0026-broker-outbox.md, docs/brokers.md):
-- the transactional outbox. A broker run's message is inserted in the transaction that
-- applies the run's fenced completion; a relay claims pending rows (`available_at` doubles as
-- the claim's lease), publishes them and marks them `sent_at`, or `dead_at` when the broker
-- refuses one for good. Sent rows are pruned in batches with history retention; dead ones stay
-- until replayed or pruned by an operator.
-- Every row is updated at most three times (claim, retry, sent): fillfactor 70 keeps those
-- versions on their page (HOT), and autovacuum visits the table at 2 % dead rows instead of
-- 20 %, as for runs (decision 0015), so a burst of sent rows never collapses its scans.
CREATE TABLE outbox (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    message_id    text NOT NULL UNIQUE,
    tenant        text NOT NULL,
    run_id        uuid NOT NULL,
    attempt       integer NOT NULL,
    connection    text NOT NULL,
    target        jsonb NOT NULL,
    body          text NOT NULL,
    headers       jsonb NOT NULL,
    created_at    timestamptz NOT NULL,
    available_at  timestamptz NOT NULL,
    tries         integer NOT NULL DEFAULT 0,
    last_error    text,
    sent_at       timestamptz,
    dead_at       timestamptz
) WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.02,
        autovacuum_analyze_scale_factor = 0.02);
CREATE INDEX outbox_pending ON outbox (available_at) WHERE sent_at IS NULL AND dead_at IS NULL;
CREATE INDEX outbox_sent ON outbox (sent_at) WHERE sent_at IS NOT NULL;
CREATE INDEX outbox_dead ON outbox (tenant, dead_at) WHERE dead_at IS NOT NULL;
