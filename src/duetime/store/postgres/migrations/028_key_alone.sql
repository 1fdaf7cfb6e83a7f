-- v28 (issue 15): duetime_key_alone, the one-statement claim's check that a keyed run of a
-- one-shot job is the only unfinished run of its job (docs/decisions/0038, "The claim of a
-- one-shot's run"). It takes the key's advisory lock without waiting (the lock the locked
-- step serializes the key's claims on: `overlap_keys_lock`) and only then reads `runs`, in a
-- statement of its own: a PL/pgSQL function that is not STABLE gets a fresh snapshot for every
-- statement it runs, so the read sees every claim that committed while holding the key. A
-- job's runs carry its partition key (or NULL, written before 027): with `runs` hash-
-- partitioned, the read probes one partition (a run without one: every run of its job).
-- Rolling: a new function only; the previous release's claims never call it, and take the same
-- advisory lock (through the locked step) before they claim a run of the key.
CREATE FUNCTION duetime_key_alone(run uuid, job uuid, part smallint, key text) RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtextextended(key, 7)) THEN
        RETURN false;
    END IF;
    IF part IS NULL THEN
        -- a run written before 027 (the default layout only): its job's newer runs carry the
        -- job's partition key
        RETURN NOT EXISTS (
            SELECT 1 FROM runs r
            WHERE r.job_id = job AND r.id <> run AND r.state IN ('scheduled', 'running')
        );
    END IF;
    RETURN NOT EXISTS (
        SELECT 1 FROM runs r
        WHERE r.job_id = job AND (r.partition_key = part OR r.partition_key IS NULL)
          AND r.id <> run AND r.state IN ('scheduled', 'running')
    );
END
$$;
