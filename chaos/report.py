"""The summary table (terminal) and the record appended to docs/reliability.md."""

from __future__ import annotations

import os
from pathlib import Path

from chaos.checks import Figure
from chaos.harness import Outcome

RECORDS_HEADING = "## Recorded runs"


def _status(f: Figure) -> str:
    if f.ok is None:
        return ""
    return "ok" if f.ok else "FAIL"


def table(outcome: Outcome) -> str:
    figures = outcome.verdict.figures
    width = max(len(f.name) for f in figures)
    vwidth = max(len(f.value) for f in figures)
    lines = [
        f"{'figure':<{width}}  {'value':<{vwidth}}  {'':4}  limit",
        "-" * (width + vwidth + 20),
    ]
    for f in figures:
        lines.append(f"{f.name:<{width}}  {f.value:<{vwidth}}  {_status(f):4}  {f.limit}")
    verdict = "PASS" if outcome.ok else "FAIL"
    lines.append("-" * (width + vwidth + 20))
    failed = ", ".join(f.name for f in outcome.verdict.failures)
    lines.append(f"verdict: {verdict}" + (f" ({failed})" if failed else ""))
    return "\n".join(lines)


def text(outcome: Outcome) -> str:
    meta = outcome.meta
    parts = [table(outcome)]
    if outcome.verdict.details:
        parts.append("details:\n" + "\n".join(f"  {d}" for d in outcome.verdict.details[:40]))
    parts.append(
        f"drain {meta.get('drain', '?')}, elapsed {meta.get('elapsed', '?')}, "
        f"leader polls {meta.get('leader_polls', '?')}, "
        f"load average {meta.get('load', '?')} (of {os.cpu_count()} CPUs)"
    )
    return "\n".join(parts)


def _md(value: str) -> str:
    return value.replace("|", "\\|")


def markdown(outcome: Outcome) -> str:
    meta = outcome.meta
    opts = meta["options"]
    settings = ", ".join(
        f"{k.removeprefix('DUETIME_').lower()}={v}" for k, v in meta["settings"].items()
    )
    mix = ", ".join(f"{k} {n}" for k, n in meta["mix"].items() if n)
    caps = ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in meta["capabilities"].items())
    lines = [
        f"### {meta['date']} — {'PASS' if outcome.ok else 'FAIL'}",
        "",
        f"- command: `{meta['command']}`",
        f"- machine: {meta['machine']}",
        f"- cluster: {opts['schedulers']} schedulers, {opts['workers']} workers; "
        f"{opts['duration']:.0f} s of chaos, a SIGKILL every ~{opts['kill_every']:g} s, "
        f"{opts['pg_restarts']} PostgreSQL restart(s) ({opts['pg_restart_mode']}); "
        f"seed {opts['seed']}",
        f"- settings: {settings}",
        f"- jobs: {mix}",
        f"- duetime features: {caps}",
        f"- drain {meta.get('drain', '?')}, whole run {meta.get('elapsed', '?')}, "
        f"1-minute load average {meta.get('load', '?')} (start → end)",
        "",
        "| figure | value | limit | |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {_md(f.name)} | {_md(f.value)} | {_md(f.limit)} | {_status(f)} |"
        for f in outcome.verdict.figures
    ]
    if outcome.verdict.details:
        lines += ["", "Details:", ""]
        lines += [f"- {_md(d)}" for d in outcome.verdict.details[:20]]
    return "\n".join(lines) + "\n"


def record(outcome: Outcome, path: Path) -> None:
    """Append the run to ``path`` under its "Recorded runs" heading (created if missing)."""
    existing = path.read_text() if path.exists() else "# Reliability\n"
    if RECORDS_HEADING not in existing:
        existing = existing.rstrip("\n") + f"\n\n{RECORDS_HEADING}\n"
    path.write_text(existing.rstrip("\n") + "\n\n" + markdown(outcome))
