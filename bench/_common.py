"""Shared by the benchmarks: databases, processes, CPU accounting, statistics, recording.

Benchmark code may write SQL directly (it is not product code). Nothing here is imported by
duetime itself.
"""

from __future__ import annotations

import argparse
import os
import platform
import secrets
import shlex
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "benchmarks.md"
PG_URL_ENV = "DUETIME_BENCH_PG_URL"
DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
RECORD_MARKER = "<!-- recorded runs: benchmarks append below this line -->"


def pg_base_url() -> str:
    return os.environ.get(PG_URL_ENV) or os.environ.get("DUETIME_TEST_PG_URL") or DEFAULT_PG_URL


def _with_db(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def create_database(prefix: str) -> str:
    """A fresh, empty PostgreSQL database; drop it with :func:`drop_database`."""
    name = f"bench_{prefix}_{secrets.token_hex(3)}"
    with psycopg.connect(pg_base_url(), autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return _with_db(pg_base_url(), name)


def drop_database(url: str) -> None:
    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(pg_base_url(), autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def migrate(url: str) -> None:
    """``duetime migrate``; with DUETIME_BENCH_HASH_PARTITIONS=N (PostgreSQL), runs then
    partitioned into N by job partition key (docs/howto/hash-partitioning.md)."""
    partitions = os.environ.get("DUETIME_BENCH_HASH_PARTITIONS", "").strip()
    run_cli(["migrate", "--db", url, *(["--hash-partitions", partitions] if partitions else [])])


def run_cli(args: Sequence[str]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "duetime", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"duetime {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


# --- processes --------------------------------------------------------------------------------


def duetime_env(**settings: object) -> dict[str, str]:
    """The environment of a duetime process with ``DUETIME_<SETTING>`` overrides."""
    env = dict(os.environ)
    env.update({f"DUETIME_{k.upper()}": str(v) for k, v in settings.items() if v is not None})
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def spawn(args: Sequence[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        list(args),
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def stop_all(procs: Iterable[subprocess.Popen[bytes]], timeout: float = 20.0) -> list[str]:
    """SIGTERM each process (only the ones we started), wait, SIGKILL stragglers; returns the
    stderr tails of processes that failed."""
    procs = list(procs)
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    errors: list[str] = []
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        err = p.stderr.read().decode(errors="replace") if p.stderr else ""
        if p.returncode not in (0, -signal.SIGTERM, -signal.SIGKILL) or "Traceback" in err:
            errors.append(err[-2000:])
    return errors


def proc_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one process (Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _postmaster_pid() -> int | None:
    """The benchmark server's postmaster (its data directory's postmaster.pid), if readable."""
    try:
        with psycopg.connect(pg_base_url(), autocommit=True) as conn:
            row = conn.execute("SHOW data_directory").fetchone()
        return int((Path(row[0]) / "postmaster.pid").read_text().split()[0]) if row else None
    except (OSError, ValueError, psycopg.Error):
        return None


def postgres_cpu_seconds() -> float:
    """CPU seconds of the benchmark server: its postmaster and every child (backends, WAL
    writer, checkpointer …); other servers on the machine are not counted. Children that
    exited meanwhile count through the postmaster's cumulative children time."""
    root = _postmaster_pid()
    if root is None:
        return float("nan")
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry.name)
        if pid == root or int(fields[1]) == root:
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            if pid == root:  # cutime + cstime: children that already exited
                total += (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")
    return total


class CpuMeter:
    """CPU seconds used by PostgreSQL and by the given processes between start and stop."""

    def __init__(self, pids: Sequence[int]) -> None:
        self.pids = list(pids)
        self.pg0 = postgres_cpu_seconds()
        self.own0 = {pid: proc_cpu_seconds(pid) for pid in self.pids}
        self.t0 = time.monotonic()

    def stop(self) -> dict[str, float]:
        wall = time.monotonic() - self.t0
        own = sum(proc_cpu_seconds(pid) - self.own0[pid] for pid in self.pids)
        return {"wall_s": wall, "pg_cpu_s": postgres_cpu_seconds() - self.pg0, "app_cpu_s": own}


# --- statistics -------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of ``values``."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def lag_summary(lags_ms: Sequence[float]) -> dict[str, float]:
    return {
        "n": len(lags_ms),
        "p50_ms": percentile(lags_ms, 50),
        "p95_ms": percentile(lags_ms, 95),
        "p99_ms": percentile(lags_ms, 99),
        "max_ms": max(lags_ms) if lags_ms else float("nan"),
    }


@dataclass(frozen=True)
class Spread:
    median: float
    low: float
    high: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        return cls(statistics.median(values), min(values), max(values), len(values))

    def show(self, fmt: str = ",.0f") -> str:
        if self.n == 1:
            return format(self.median, fmt)
        return f"{self.median:{fmt}} ({self.low:{fmt}}–{self.high:{fmt}}, n={self.n})"


# --- machine and recording --------------------------------------------------------------------


def machine() -> dict[str, str]:
    info = {
        "cores": str(os.cpu_count()),
        "python": platform.python_version(),
        "kernel": platform.release(),
        "load": " ".join(f"{x:.1f}" for x in os.getloadavg()),
    }
    try:
        with psycopg.connect(pg_base_url(), autocommit=True) as conn:
            version = conn.execute("SHOW server_version").fetchone()
            info["postgresql"] = version[0] if version else "?"
            for name in ("shared_buffers", "synchronous_commit", "fsync", "max_wal_size"):
                row = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()
                info[name] = row[0] if row else "?"
    except psycopg.Error:
        info["postgresql"] = "unreachable"
    try:
        info["commit"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except OSError:
        info["commit"] = "?"
    return info


def command_line() -> str:
    return "python -m " + " ".join(
        shlex.quote(a) for a in [_module_name(), *sys.argv[1:]] if a != ""
    )


def _module_name() -> str:
    main = sys.modules["__main__"]
    spec = getattr(main, "__spec__", None)
    return spec.name if spec is not None else Path(sys.argv[0]).stem


def report(title: str, lines: Sequence[str], *, record: bool) -> None:
    """Print the figures; with ``record`` also append them to docs/benchmarks.md."""
    print(f"== {title}")
    for line in lines:
        print(line)
    sys.stdout.flush()
    if not record:
        return
    m = machine()
    header = (
        f"### {title} — {datetime.now(UTC):%Y-%m-%d %H:%M} UTC\n\n"
        f"- machine: {m['cores']} cores, Python {m['python']}, PostgreSQL "
        f"{m.get('postgresql', '?')} (shared_buffers={m.get('shared_buffers', '?')}, "
        f"synchronous_commit={m.get('synchronous_commit', '?')}, fsync={m.get('fsync', '?')}, "
        f"max_wal_size={m.get('max_wal_size', '?')}), commit {m.get('commit', '?')} plus the "
        f"working tree, load average at the end {m['load']}\n"
        f"- command: `{command_line()}`\n\n"
    )
    text = DOCS.read_text() if DOCS.exists() else "# Benchmarks\n"
    if RECORD_MARKER not in text:
        text = text.rstrip("\n") + f"\n\n## Recorded runs\n\n{RECORD_MARKER}\n"
    body = "\n".join(lines)
    DOCS.write_text(text.rstrip("\n") + "\n\n" + header + "```\n" + body + "\n```\n")


def base_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--record", action="store_true", help="append the figures to docs/benchmarks.md"
    )
    return parser


def exit_on_sigterm() -> None:
    """SIGTERM (e.g. from `timeout`) unwinds like Ctrl-C, so the processes we started stop."""

    def handler(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


def wait_until(predicate: object, timeout: float, interval: float = 0.25) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(interval)
    return False


# --- honest measurement -----------------------------------------------------------------------

WORKER_APP_NAME = "duetime-bench-measured"
"""``application_name`` (through ``PGAPPNAME``) of every connection of the processes measured:
their PostgreSQL backends are found by it in ``pg_stat_activity``. The benchmark's own
connections keep another name, so its polling is never counted."""

BENCH_TAG = "/* bench */"
"""Prefix of the benchmark's own statements: excluded from the pg_stat_statements figures."""


class BenchError(RuntimeError):
    """A benchmark step failed: the message says which and why (printed as one line)."""


def guarded_main(main: Callable[[], None]) -> None:
    """Run a benchmark's ``main``: a :class:`BenchError` (or any ``RuntimeError``, ``OSError``
    or database error) ends the process with exit status 1 and one line saying why, instead of a
    traceback or a figure computed from nothing."""
    exit_on_sigterm()
    try:
        main()
    except (RuntimeError, OSError, psycopg.Error) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        print(f"benchmark failed: {reason}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None


def measured_env(**settings: object) -> dict[str, str]:
    """:func:`duetime_env` for a process whose database work is measured: its connections carry
    :data:`WORKER_APP_NAME`."""
    env = duetime_env(**settings)
    env["PGAPPNAME"] = WORKER_APP_NAME
    return env


def pg_stat_statements_ready(url: str) -> bool:
    """Whether the server preloads pg_stat_statements; if so, the extension is created in the
    database ``url`` (it needs ``shared_preload_libraries``, a restart-only setting, so a
    benchmark never sets it up on a shared server: it falls back to backend CPU)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SHOW shared_preload_libraries").fetchone()
        if row is None or "pg_stat_statements" not in row[0]:
            return False
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    return True


class BackendMeter:
    """What the database spent serving the measured processes, between :meth:`start` and
    :meth:`stop`, without the benchmark's own statements.

    Always: the CPU seconds (from ``/proc``) of the PostgreSQL backends whose
    ``application_name`` is :data:`WORKER_APP_NAME` in this database. Backends that connect
    during the window count from their first CPU tick; :meth:`sample` (call it from the
    wait loop) finds them and keeps each backend's last reading, so one that disconnects
    before :meth:`stop` still counts up to that reading. Background processes (WAL writer,
    checkpointer, autovacuum) are not in this figure. The server must run on this machine.

    With pg_stat_statements preloaded (see :func:`pg_stat_statements_ready`): also the
    statements' execution + planning time, WAL bytes and buffer accesses in this database,
    without statements starting with :data:`BENCH_TAG`. Its counters are reset at
    :meth:`start` for this database only. It keys statements by shape, comments aside: a
    statement of the benchmark's own that a measured process also ran would count under the
    text seen first, so the benchmark's statements are shapes of its own (its probes).

    The meter's own connection is the benchmark's (another ``application_name``), so the
    queries it runs are never counted."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.conn = psycopg.connect(url, autocommit=True)
        self.statements = pg_stat_statements_ready(url)
        self.base: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.running = False

    def _backends(self) -> list[int]:
        rows = self.conn.execute(
            f"{BENCH_TAG} SELECT pid FROM pg_stat_activity "
            "WHERE application_name = %s AND datname = current_database()",
            (WORKER_APP_NAME,),
        ).fetchall()
        return [int(r[0]) for r in rows]

    def connected_count(self) -> int:
        """How many measured processes' connections this database has now."""
        return len(self._backends())

    def start(self) -> None:
        if self.statements:
            self.conn.execute(
                f"{BENCH_TAG} SELECT pg_stat_statements_reset(0, "
                "(SELECT oid FROM pg_database WHERE datname = current_database()), 0)"
            )
        for pid in self._backends():
            self.base[pid] = self.last[pid] = proc_cpu_seconds(pid)
        self.running = True

    def sample(self) -> None:
        """Read the measured backends' CPU now (new backends start from zero)."""
        if not self.running:
            return
        for pid in self._backends():
            cpu = proc_cpu_seconds(pid)
            self.base.setdefault(pid, 0.0)
            if cpu >= self.last.get(pid, 0.0):
                self.last[pid] = cpu

    def stop(self) -> dict[str, float]:
        """``backend_cpu_s`` and ``backends`` always; with pg_stat_statements also
        ``statements_s``, ``wal_bytes`` and ``buffers``."""
        self.sample()
        self.running = False
        out = {
            "backend_cpu_s": sum(self.last[pid] - self.base[pid] for pid in self.last),
            "backends": float(len(self.last)),
        }
        if self.statements:
            row = self.conn.execute(
                f"{BENCH_TAG} SELECT coalesce(sum(total_exec_time + total_plan_time), 0), "
                "coalesce(sum(wal_bytes), 0), coalesce(sum(shared_blks_hit + shared_blks_read "
                "+ local_blks_hit + local_blks_read), 0) FROM pg_stat_statements "
                "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                "AND query NOT LIKE %s",
                (BENCH_TAG + "%",),
            ).fetchone()
            if row is not None:
                out["statements_s"] = float(row[0]) / 1000
                out["wal_bytes"] = float(row[1])
                out["buffers"] = float(row[2])
        return out

    def close(self) -> None:
        self.conn.close()


def wait_for(
    what: str, predicate: Callable[[], bool], timeout: float, interval: float = 1.0,
    on_tick: Callable[[], None] | None = None,
) -> None:  # fmt: skip
    """Call ``predicate`` every ``interval`` seconds until it holds; :class:`BenchError` naming
    ``what`` after ``timeout`` seconds. ``on_tick`` runs before each check (e.g.
    :meth:`BackendMeter.sample`). Bounded in time and so in count."""
    deadline = time.monotonic() + timeout
    while True:
        if on_tick is not None:
            on_tick()
        if predicate():
            return
        if time.monotonic() >= deadline:
            raise BenchError(f"{what}: not done within {timeout:.0f} s")
        time.sleep(min(interval, max(0.0, deadline - time.monotonic())))


def check_alive(procs: Sequence[subprocess.Popen[bytes]], what: str) -> None:
    """:class:`BenchError` with the stderr tail of the first of ``procs`` that exited."""
    for p in procs:
        if p.poll() is not None:
            err = p.stderr.read().decode(errors="replace") if p.stderr else ""
            tail = " | ".join(err.strip().splitlines()[-3:]) or "no output"
            raise BenchError(f"{what} (pid {p.pid}) exited with {p.returncode}: {tail}")
