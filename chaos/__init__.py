"""The chaos test: a duetime cluster (real scheduler and worker processes on one PostgreSQL
database) under SIGKILLs and PostgreSQL restarts, checked afterwards from the database alone.

``python -m chaos --help`` (or ``python chaos/run.py``); docs/reliability.md explains the test,
its figures and the last recorded result.
"""
