"""``duetime bench``: the burn-down and fire benchmarks against your own database
(:mod:`duetime.app.benchmarking`), with a summary table or JSON."""

from __future__ import annotations

from typing import Annotated

import typer

from duetime.app.benchmarking import BenchFailed, BenchReport, run_bench
from duetime.cli._common import JsonOption, fail, print_json, run_async, settings_for
from duetime.cli._output import print_table

commands = typer.Typer()

BENCHMARKS = ("all", "burndown", "fire")


@commands.command()
def bench(
    database: Annotated[
        str | None,
        typer.Option(
            "--database",
            "--db",
            envvar="DUETIME_DATABASE_URL",
            show_envvar=True,
            help="SQLite path or postgresql:// URL of the database to measure.",
        ),
    ] = None,
    runs: Annotated[
        int, typer.Option("--runs", min=1, help="Burn-down: runs due at once, then drained.")
    ] = 5000,
    rate: Annotated[
        float, typer.Option("--rate", min=1, help="Fire: one-shot jobs due per second.")
    ] = 500.0,
    seconds: Annotated[
        float, typer.Option("--seconds", min=0.1, help="Fire: length of the window.")
    ] = 5.0,
    timeout: Annotated[
        float, typer.Option("--timeout", min=1, help="Seconds each benchmark may overrun.")
    ] = 120.0,
    only: Annotated[
        str, typer.Option("--only", metavar="NAME", help="all, burndown or fire.")
    ] = "all",
    as_json: JsonOption = False,
) -> None:
    """Measure throughput (burn-down) and fire accuracy on your own database.

    Works in a scratch schema (PostgreSQL) or a scratch file beside the SQLite file, dropped
    at the end: your jobs and runs are not touched. The scheduler and worker run in this
    process with the default settings. Burn-down: --runs runs already due, drained by one
    worker (runs/s from the database's claim and finish instants). Fire: --rate one-shot jobs
    a second for --seconds, fire lag = start - scheduled instant (p50, p95, p99, max). Exits 1
    with the reason when a benchmark cannot finish."""
    if only not in BENCHMARKS:
        fail(f"--only: {only!r} is not one of: {', '.join(BENCHMARKS)}")
    url = settings_for(database).database_url

    async def measure() -> BenchReport | BenchFailed:
        try:
            return await run_bench(
                url,
                runs=runs,
                rate=rate,
                seconds=seconds,
                timeout=timeout,
                burndown=only in ("all", "burndown"),
                fire=only in ("all", "fire"),
            )
        except BenchFailed as exc:  # exit 1; run_async makes other errors usage errors (2)
            return exc

    report = run_async(measure)
    if isinstance(report, BenchFailed):
        fail(str(report), code=1)
    if as_json:
        print_json(report.jsonable())
        return
    rows: list[tuple[str, str, str]] = []
    if report.burndown is not None:
        b = report.burndown
        rows.append(
            (
                "burn-down",
                f"{b.runs:,} runs in {b.seconds:.2f} s",
                f"{b.runs_per_second:,.0f} runs/s",
            )
        )
    if report.fire is not None:
        f = report.fire
        rows.append(
            (
                "fire",
                f"{f.runs:,} runs at {f.rate:,.0f}/s, {f.missing} missing",
                f"lag p50 {f.p50_ms:.1f} ms, p95 {f.p95_ms:.1f} ms, "
                f"p99 {f.p99_ms:.1f} ms, max {f.max_ms:.1f} ms",
            )
        )
    print_table(["benchmark", "workload", "result"], rows, title=f"duetime bench ({report.store})")
