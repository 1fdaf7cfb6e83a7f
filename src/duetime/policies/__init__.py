"""Pure policies: rules that decide, with no I/O, shared by the store and the engine.

- :mod:`duetime.policies.fairness` — who is claimed first (aging, tenant rounds, quotas).
- :mod:`duetime.policies.overlap` — what a run with an overlap key may do at claim and start.
- :mod:`duetime.policies.status` — which job status moves are allowed, what ends a job's
  pending runs, where a run whose lease was lost goes.

This package sits below ``store/`` and the services (import-linter layers in
``pyproject.toml``): it imports only value types, so a store applies a policy the same way a
service or a test does (docs/decisions/0008-one-sql-store-two-dialects.md).
"""
