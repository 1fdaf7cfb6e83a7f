"""The failover test, short version (docs/howto/failover.md): a scheduler and two workers as
real ``duetime`` processes on a Patroni cluster of two PostgreSQL 15 nodes in strict
synchronous mode (tests/failover/ha.py), reaching it through a multi-host URL with
``target_session_attrs=read-write``, running every-second crons, exactly-once jobs, one-shots
and a workflow (the chaos workload, chaos/workload.py), plus a trigger process (``app.trigger``
with idempotency keys, retried until acknowledged), a backlog of runs queued before the workers
start (tests/failover/load.py) and a ``duetime server`` (tests/failover/api.py). Meanwhile the
standby's PostgreSQL and Patroni are SIGKILLed (commits wait until it is back), then the
primary's: the standby is promoted and the killed node rejoins. Then the chaos checker reads
the database: no occurrence without a finished run or a recorded skip, no duplicate run per
occurrence, no duplicate exactly-once effect, no acknowledged trigger without its run, every
run final; the API served a trigger before each fault, answered 201 or a 503 problem during
it (no 500, no hang, no traceback) and served one again once the new primary was up.
Invariants only, never a duration. The SIGSTOP scenario and the figures are in the full
bench (bench/failover.py).

Where Patroni, etcd or PostgreSQL 15 is not installed the test is skipped — and fails under
``CI=true`` (.ci/run installs them).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from chaos.harness import Options, run_chaos
from chaos.report import text

from tests.failover.api import ApiProbe
from tests.failover.faults import Faults
from tests.failover.ha import HaCluster, NodeSpec, missing_tools
from tests.failover.load import TriggerLoad

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.failover]

NODES = (NodeSpec("node1", 5491, 8091), NodeSpec("node2", 5492, 8092))


def _cannot_run(reason: str) -> None:
    if os.environ.get("CI", "").strip().lower() == "true":
        pytest.fail(f"{reason} — required when CI=true", pytrace=False)
    pytest.skip(reason)


@pytest.mark.timeout(400)
def test_no_run_is_lost_or_doubled_across_a_failover(tmp_path: Path) -> None:
    missing = missing_tools()
    if missing:
        _cannot_run(
            f"missing {', '.join(missing)} (apt-get install -y patroni etcd-server etcd-client)"
        )
    base = Path(tempfile.mkdtemp(prefix="duetime-failover-"))
    base.chmod(0o755)  # Patroni and PostgreSQL run as the postgres user below it
    cluster = HaCluster(base / "cluster", NODES)
    try:
        cluster.start()
        api = ApiProbe(tmp_path / "api")
        load = TriggerLoad(rate=20, backlog=300, workdir=tmp_path / "load")
        faults = Faults(cluster, ("kill-standby", "kill-primary"), api=api)
        options = Options(
            duration=70,  # the faults come at 1/3 and 2/3 of it, each once the last is over
            schedulers=1,
            workers=2,
            kill_every=1e9,  # no duetime process is killed: the database is the fault
            pg_restarts=2,
            restarter=faults,
            base_url=cluster.url(),
            cron_jobs=16,
            one_shots=100,
            workflow_crons=0,
            workflow_one_shots=1,
            drain_timeout=90,
            lock_timeout=60,
            workdir=tmp_path / "chaos",
            command="pytest tests/failover/test_failover_short.py",
            addons=(load, api),
        )
        outcome = run_chaos(options, say=print)
        summary = text(outcome)
        print(summary)
        assert outcome.ok, f"{summary}\n\nprocess logs (tails):\n{outcome.logs}"
        assert [f.scenario for f in faults.done] == ["kill-standby", "kill-primary"]
        assert faults.done[1].promoted is not None, "the standby was promoted"
        assert outcome.verdict.data["expected"] > 100, "the workload ran"
        assert outcome.verdict.data["triggers_acked"] > 100, "the trigger process ran"
        assert [a.phase for a in api.answers if a.phase.startswith("before")] == [
            "before 1",
            "before 2",
        ]
        assert len(api.served_after) == 2, "a trigger was tried through the API after each fault"
    finally:
        cluster.stop()
        if os.environ.get("DUETIME_KEEP_FAILOVER") is None:
            import shutil

            shutil.rmtree(base, ignore_errors=True)
