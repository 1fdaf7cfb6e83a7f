-- Runs in flight per tenant, for the fair claim's rounds (counted up to 1000 per tenant
-- group) and the in-flight quota: without it both counted every running run.
CREATE INDEX runs_running_tenant ON runs (tenant) WHERE state = 'running';
