"""``duetime doctor``: check a deployment and say what to fix (``duetime.app.doctor``)."""

from __future__ import annotations

import typer

from duetime.app.doctor import Finding, Status, diagnose, exit_code
from duetime.cli._common import DbOption, JsonOption, print_json, run_async, settings_for
from duetime.cli._output import print_table

commands = typer.Typer()

_MARK = {Status.OK: "ok", Status.WARN: "WARN", Status.FAIL: "FAIL"}


@commands.command()
def doctor(db: DbOption = None, as_json: JsonOption = False) -> None:
    """Check a deployment and say what to fix.

    The database --db names answers and is migrated, this host's clock agrees with it, the
    time-zone rules in use, schedulers, a leader and workers alive, nothing falling behind,
    alerts firing. Each problem comes with its fix. Exit 1 when a check fails (warnings exit
    0). Writes nothing."""
    settings = settings_for(db)
    findings: list[Finding] = run_async(lambda: diagnose(settings))
    if as_json:
        print_json(
            {
                "ok": exit_code(findings) == 0,
                "checks": [
                    {"check": f.check, "status": str(f.status), "detail": f.detail, "fix": f.fix}
                    for f in findings
                ],
            }
        )
    else:
        print_table(
            ["check", "status", "detail"],
            [(f.check, _MARK[f.status], f.detail) for f in findings],
        )
        fixes = [f for f in findings if f.fix is not None]
        for f in fixes:
            typer.echo(f"{f.check}: {f.fix}")
    raise typer.Exit(exit_code(findings))
