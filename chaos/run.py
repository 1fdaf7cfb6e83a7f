"""``python -m chaos`` / ``python chaos/run.py``: the chaos test's command line.

Exit status: 0 when every invariant held, 1 when one failed, 2 when the test could not run.
"""

from __future__ import annotations

import argparse
import random
import shlex
import signal
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from chaos import report
from chaos.harness import Options, SetupError, run_chaos

RELIABILITY_DOC = Path(__file__).resolve().parent.parent / "docs" / "reliability.md"


def parse(argv: list[str] | None) -> argparse.Namespace:
    d = Options()
    p = argparse.ArgumentParser(
        prog="python -m chaos",
        description=(
            "Run duetime schedulers and workers on a fresh PostgreSQL database, SIGKILL them "
            "and restart PostgreSQL while a few hundred jobs run, then check the invariants "
            "from the database. Loopback only; the database is dropped at the end."
        ),
    )
    p.add_argument("--duration", type=float, default=d.duration, help="seconds of chaos")
    p.add_argument("--schedulers", type=int, default=d.schedulers)
    p.add_argument("--workers", type=int, default=d.workers)
    p.add_argument(
        "--kill-every", type=float, default=d.kill_every, help="mean seconds between SIGKILLs"
    )
    p.add_argument("--pg-restarts", type=int, default=d.pg_restarts)
    p.add_argument(
        "--pg-restart-mode", choices=("alternate", "fast", "immediate"), default=d.pg_restart_mode
    )
    p.add_argument(
        "--pg-restart-cmd",
        help="shell command restarting PostgreSQL ({mode} → fast|immediate); default: "
        "pg_ctlcluster for the local cluster on the URL's port (needs root)",
    )
    p.add_argument(
        "--pg-url",
        default=d.base_url,
        help="server to use (a database is created next to it); default DUETIME_TEST_PG_URL "
        "or the local default",
    )
    p.add_argument("--cron-jobs", type=int, default=d.cron_jobs, help="every-second cron jobs")
    p.add_argument("--one-shots", type=int, default=d.one_shots)
    p.add_argument(
        "--workflow-crons",
        type=int,
        default=d.workflow_crons,
        help="jobs starting the chaos workflow (fan-out of 100 and a fan-in) every 6 s",
    )
    p.add_argument("--workflow-one-shots", type=int, default=d.workflow_one_shots)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--drain-timeout", type=float, default=d.drain_timeout)
    p.add_argument(
        "--strict-timing",
        action="store_true",
        help="fail on takeovers over their bound that no restart or leader kill explains",
    )
    p.add_argument("--keep", action="store_true", help="keep the database and the process logs")
    p.add_argument(
        "--lock-timeout",
        type=float,
        default=d.lock_timeout,
        help="seconds to wait while another chaos run uses the same PostgreSQL server",
    )
    p.add_argument("--workdir", type=Path, help="where the task module and logs go")
    p.add_argument("-v", "--verbose", action="store_true", help="print kills and restarts")
    p.add_argument(
        "--record",
        action="store_true",
        help=f"append the summary to {RELIABILITY_DOC.relative_to(RELIABILITY_DOC.parents[1])}",
    )
    return p.parse_args(argv)


def _terminate(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    given = list(argv if argv is not None else sys.argv[1:])
    args = parse(given)
    seed = args.seed
    if seed is None:
        seed = random.SystemRandom().randrange(1_000_000)
    opts = Options(
        duration=args.duration,
        schedulers=args.schedulers,
        workers=args.workers,
        kill_every=args.kill_every,
        pg_restarts=args.pg_restarts,
        pg_restart_mode=args.pg_restart_mode,
        pg_restart_cmd=args.pg_restart_cmd,
        base_url=args.pg_url,
        cron_jobs=args.cron_jobs,
        one_shots=args.one_shots,
        workflow_crons=args.workflow_crons,
        workflow_one_shots=args.workflow_one_shots,
        seed=seed,
        drain_timeout=args.drain_timeout,
        strict_timing=args.strict_timing,
        keep=args.keep,
        lock_timeout=args.lock_timeout,
        workdir=args.workdir,
        verbose=args.verbose,
        command=shlex.join(["python", "-m", "chaos", *given]),
    )
    signal.signal(signal.SIGTERM, _terminate)  # cleanup (finally blocks) on SIGTERM too
    try:
        outcome = run_chaos(opts)
    except SetupError as exc:
        print(f"chaos: cannot run: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("chaos: interrupted; every process of the run was stopped", file=sys.stderr)
        return 130
    print(report.text(outcome))
    if not outcome.ok and outcome.logs:
        print("\nprocess logs (tails):\n" + outcome.logs)
    if args.record:
        report.record(outcome, RELIABILITY_DOC)
        print(f"recorded in {RELIABILITY_DOC}")
    return 0 if outcome.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
