"""The chaos test, short version: 2 schedulers and 3 workers as real processes on a fresh
PostgreSQL database, ~45 s of SIGKILLs (one every ~3 s) and a PostgreSQL restart while jobs of
every kind and workflows (a fan-out of 100 and a fan-in) run, then every invariant checked from
the database (chaos/, docs/reliability.md).

It restarts the PostgreSQL server at ``DUETIME_TEST_PG_URL``: with ``pg_ctlcluster`` when it runs
as root next to that cluster, or with the shell command in ``CHAOS_PG_RESTART_CMD`` (``{mode}``
becomes ``fast`` or ``immediate``). Each restart waits until the server accepts connections
again, and the server is left running on every exit path. Where it cannot restart PostgreSQL
the test is skipped (failed under ``CI=true``). ``CHAOS_SEED`` fixes the random choices.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from chaos.harness import Options, SetupError, run_chaos
from chaos.pg import accepts_connections, base_url_from_env, find_restarter
from chaos.report import text

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def _cannot_run(reason: str) -> None:
    if os.environ.get("CI", "").strip().lower() == "true":
        pytest.fail(f"{reason} — required when CI=true", pytrace=False)
    pytest.skip(reason)


@pytest.mark.timeout(280)
def test_invariants_hold_under_kills_and_a_postgres_restart(tmp_path: Path) -> None:
    base = base_url_from_env()
    if not accepts_connections(base):
        _cannot_run(f"PostgreSQL unreachable at {base}")
    restart_cmd = os.environ.get("CHAOS_PG_RESTART_CMD") or None
    if find_restarter(base, restart_cmd) is None:
        _cannot_run(
            "cannot restart PostgreSQL here (not root next to a pg_ctlcluster cluster on "
            "the URL's port; set CHAOS_PG_RESTART_CMD)"
        )
    seed = int(os.environ["CHAOS_SEED"]) if os.environ.get("CHAOS_SEED") else None
    options = Options(
        duration=45,
        schedulers=2,
        workers=3,
        kill_every=3,
        pg_restarts=1,
        pg_restart_cmd=restart_cmd,
        base_url=base,
        seed=seed,
        drain_timeout=60,
        lock_timeout=120,
        workdir=tmp_path / "chaos",
        command="pytest tests/chaos/test_chaos_short.py",
    )
    try:
        outcome = run_chaos(options, say=print)
    except SetupError as exc:  # e.g. another chaos run is restarting this server
        _cannot_run(str(exc))
    summary = text(outcome)
    print(summary)
    assert outcome.ok, f"{summary}\n\nprocess logs (tails):\n{outcome.logs}"
    assert accepts_connections(base), "PostgreSQL must be running after the test"
    figures = {f.name: f.value for f in outcome.verdict.figures}
    assert figures["PostgreSQL restarts (down → accepting)"] != "0", "no restart happened"
    assert outcome.verdict.data["expected"] > 1000, "the workload ran"
    assert outcome.verdict.data["workflow_instances"] > 3, "the workflows ran"
