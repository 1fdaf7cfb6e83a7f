"""duetime side by side with PgQueuer and Procrastinate, same PostgreSQL, interleaved runs.

    python -m bench.peers burndown                 # 3 interleaved rounds (duetime, each peer)
    python -m bench.peers fire --repeat 1          # 1,600/s one-shots for 60 s
    python -m bench.peers burndown --only duetime,pgqueuer-b100 --runs 20000

Each peer is installed by this script into its own virtualenv, bench/.peers/NAME-VERSION
(gitignored), with pip, and driven through bench/peer_NAME.py running in that virtualenv;
peer code is never copied into this repository. Every run gets its own database.

Burn-down: N no-op jobs enqueued up front, then two worker processes drain them; rate = N /
(last worker exit − first job start) for peers (exit comes after their final status writes),
and N / (last finished_at − first claimed_at) for duetime. Fire accuracy: one-shot jobs spread
evenly over the window, inserted up front, two worker processes; lag = start − due instant.
Peers run only one-shots (duetime's fire benchmark adds every-second cron jobs).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench._common import (
    ROOT,
    Spread,
    base_parser,
    create_database,
    drop_database,
    exit_on_sigterm,
    guarded_main,
    lag_summary,
    report,
    stop_all,
)
from bench.burndown import duetime_burndown
from bench.fire import duetime_fire

PEERS_DIR = ROOT / "bench" / ".peers"
VERSIONS = {"pgqueuer": "1.6.0", "procrastinate": "3.10.0"}
EXTRA = {"pgqueuer": ["asyncpg"], "procrastinate": []}


def ensure_peer(name: str, version: str) -> Path:
    """The python of a virtualenv holding ``name==version`` (created on first use)."""
    env = PEERS_DIR / f"{name}-{version}"
    python = env / "bin" / "python"
    probe = f"import importlib.metadata as m; assert m.version({name!r}) == {version!r}"
    check = [str(python), "-c", probe]
    if python.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return python
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", f"{name}=={version}", *EXTRA[name]],
        check=True,
    )
    return python


def latest_version(name: str) -> str | None:
    """The newest release on the package index (pip's own lookup), or None offline."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", name],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    first = done.stdout.splitlines()[0] if done.returncode == 0 and done.stdout else ""
    return first.split("(")[1].rstrip(")") if "(" in first else None


class Peer:
    def __init__(self, name: str, version: str, *, batch: int | None = None,
                 polling: float | None = None) -> None:  # fmt: skip
        self.name, self.version, self.batch, self.polling = name, version, batch, polling
        self.python = ensure_peer(name, version)
        self.script = ROOT / "bench" / f"peer_{name}.py"

    @property
    def label(self) -> str:
        if self.name == "pgqueuer":
            setting = f"batch {self.batch}" if self.batch else "default batch"
        else:
            setting = f"polling {self.polling} s" if self.polling else "default polling"
        return f"{self.name} {self.version} ({setting})"

    def _run(self, *args: str) -> str:
        done = subprocess.run(
            [str(self.python), str(self.script), *args], capture_output=True, text=True
        )
        if done.returncode != 0:
            raise RuntimeError(f"{self.label} {args[0]} failed: {done.stderr[-2000:]}")
        return done.stdout

    def _workers(self, dsn: str, count: int, folder: Path, duration: float | None) -> list[Any]:
        procs = []
        for i in range(count):
            args = [str(self.python), str(self.script), "work", dsn, str(folder / f"w{i}.json")]
            if self.batch:
                args += ["--batch", str(self.batch)]
            if self.polling:
                args += ["--polling", str(self.polling)]
            if duration is not None:
                args += ["--duration", str(duration)]
            procs.append(
                subprocess.Popen(
                    args,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    start_new_session=True,
                )
            )
        return procs

    def _collect(self, procs: list[Any], folder: Path, timeout: float) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        for p in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(max(0.1, deadline - time.monotonic()))
        errors = stop_all(procs)
        if errors:
            print(f"{self.label} errors:\n" + "\n".join(errors), file=sys.stderr)
        results = []
        for f in sorted(folder.glob("w*.json")):
            results.append(json.loads(f.read_text()))
        return results

    def burndown(self, runs: int, workers: int, timeout: float) -> dict[str, Any]:
        dsn = create_database(self.name)
        try:
            self._run("setup", dsn)
            enqueue = json.loads(self._run("enqueue", dsn, str(runs)))["enqueue_s"]
            with tempfile.TemporaryDirectory() as tmp:
                procs = self._workers(dsn, workers, Path(tmp), None)
                results = self._collect(procs, Path(tmp), timeout)
            done = sum(r["done"] for r in results)
            firsts = [r["first"] for r in results if r["first"]]
            span = max(r["exit"] for r in results) - min(firsts)
            return {"label": self.label, "runs_per_s": done / span, "done": done,
                    "enqueue_per_s": runs / enqueue}  # fmt: skip
        finally:
            drop_database(dsn)

    def fire(self, rate: float, seconds: float, workers: int, settle: float) -> dict[str, Any]:
        dsn = create_database(self.name)
        try:
            self._run("setup", dsn)
            n = round(rate * seconds)
            # Procrastinate defers one batch per 10 ms slot: give it time to enqueue
            start = time.time() + (15.0 if self.name == "pgqueuer" else 20.0 + n / 1000)
            self._run("enqueue", dsn, str(n), str(start), str(seconds))
            if time.time() > start - 2:
                raise RuntimeError(f"{self.label}: enqueueing took too long")
            duration = start - time.time() + seconds + settle
            with tempfile.TemporaryDirectory() as tmp:
                procs = self._workers(dsn, workers, Path(tmp), duration)
                results = self._collect(procs, Path(tmp), duration + 30)
            lags = [lag for r in results for lag in r["lags"]]
            return {"label": self.label, "expected": n, "missing": n - len(lags),
                    **lag_summary(lags)}  # fmt: skip
        finally:
            drop_database(dsn)


def _peers(only: set[str] | None, names: list[str]) -> list[tuple[str, Callable[[], Peer]]]:
    versions: dict[str, list[str]] = {}
    if only is not None and not any(o.startswith(("pgqueuer", "procrastinate")) for o in only):
        return []
    for name in ("pgqueuer", "procrastinate"):
        found = [VERSIONS[name]]
        latest = latest_version(name)
        if latest and latest != VERSIONS[name]:
            found.append(latest)
        versions[name] = found
    configs: list[tuple[str, Callable[[], Peer]]] = []
    for v in versions["pgqueuer"]:
        configs.append((f"pgqueuer-b100@{v}", lambda v=v: Peer("pgqueuer", v, batch=100)))
        configs.append((f"pgqueuer-default@{v}", lambda v=v: Peer("pgqueuer", v)))
    for v in versions["procrastinate"]:
        configs.append((f"procrastinate-default@{v}", lambda v=v: Peer("procrastinate", v)))
        configs.append(
            (f"procrastinate-poll0.5@{v}", lambda v=v: Peer("procrastinate", v, polling=0.5))
        )
    if only:
        configs = [c for c in configs if c[0].split("@")[0] in only]
    return configs


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("workload", choices=["burndown", "fire"])
    parser.add_argument("--runs", type=int, default=100_000, help="burn-down N (duetime, PgQueuer)")
    parser.add_argument(
        "--slow-runs",
        type=int,
        default=10_000,
        help="burn-down N for Procrastinate (~400/s: 100,000 would take minutes)",
    )
    parser.add_argument("--rate", type=float, default=1600.0)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, help="duetime worker concurrency (burn-down)")
    parser.add_argument("--batch", type=int, help="duetime worker batch (burn-down)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--settle", type=float, default=20.0)
    parser.add_argument("--only", help="comma-separated: duetime, pgqueuer-b100, pgqueuer-default, "
                        "procrastinate-default, procrastinate-poll0.5")  # fmt: skip
    args = parser.parse_args()
    exit_on_sigterm()
    only = set(args.only.split(",")) if args.only else None
    configs = _peers(only, [])
    with_duetime = only is None or "duetime" in only
    built = {key: make() for key, make in configs}
    figures: dict[str, list[dict[str, Any]]] = {}
    for round_ in range(args.repeat):
        if with_duetime:
            if args.workload == "burndown":
                r = duetime_burndown(
                    "postgres",
                    args.runs,
                    args.workers,
                    concurrency=args.concurrency,
                    batch=args.batch,
                )
                r["label"] = f"duetime (concurrency {r['concurrency']}, batch {r['batch']})"
            else:
                r = duetime_fire("postgres", rate=args.rate, seconds=args.seconds, crons=0,
                                 workers=args.workers, settle=args.settle, lead=30.0)  # fmt: skip
                r["label"] = "duetime"
            figures.setdefault("duetime", []).append(r)
            print(f"round {round_ + 1}: {_show(args.workload, r)}", flush=True)
        for key, peer in built.items():
            try:
                if args.workload == "burndown":
                    n = args.slow_runs if peer.name == "procrastinate" else args.runs
                    r = peer.burndown(n, args.workers, timeout=max(120.0, n / 50))
                    r["runs"] = n
                else:
                    r = peer.fire(args.rate, args.seconds, args.workers, args.settle)
            except RuntimeError as exc:  # one peer failing does not lose the others' figures
                print(f"round {round_ + 1}: {peer.label} failed: {exc}", flush=True)
                continue
            figures.setdefault(key, []).append(r)
            print(f"round {round_ + 1}: {_show(args.workload, r)}", flush=True)
    report(f"peers: {args.workload}", _lines(args.workload, figures), record=args.record)


def _show(workload: str, r: dict[str, Any]) -> str:
    if workload == "burndown":
        return f"{r['label']}: {r['runs_per_s']:,.0f} runs/s"
    return (
        f"{r['label']}: p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, max "
        f"{r['max_ms']:.1f} ms, not started {r.get('missing', r.get('never_started', 0))}"
    )


def _lines(workload: str, figures: dict[str, list[dict[str, Any]]]) -> list[str]:
    lines = []
    base = figures.get("duetime")
    for key, results in figures.items():
        label = results[0]["label"]
        if workload == "burndown":
            rate = Spread.of([r["runs_per_s"] for r in results])
            ratio = ""
            if base and key != "duetime":
                mine = Spread.of([b["runs_per_s"] for b in base]).median
                ratio = f"; duetime/peer {mine / rate.median:.2f}×"
            lines.append(f"{label}: {rate.show()} runs/s{ratio}")
        else:
            p50 = Spread.of([r["p50_ms"] for r in results])
            p99 = Spread.of([r["p99_ms"] for r in results])
            worst = max(r["max_ms"] for r in results)
            missing = sum(r.get("missing", r.get("never_started", 0)) for r in results)
            ratio = ""
            if base and key != "duetime":
                b99 = Spread.of([b["p99_ms"] for b in base]).median
                ratio = f"; p99 duetime/peer {b99 / p99.median:.3f}"
            lines.append(
                f"{label}: p50 {p50.show('.1f')} ms, p99 {p99.show('.1f')} ms, max {worst:.1f} "
                f"ms, not started within the settle time {missing}{ratio}"
            )
    return lines


if __name__ == "__main__":
    guarded_main(main)
