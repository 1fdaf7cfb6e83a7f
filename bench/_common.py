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
from collections.abc import Iterable, Sequence
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
    run_cli(["migrate", "--db", url])


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
