"""``duetime jobs import --crontab FILE``: crontab lines → command-target jobs, and the
allow-list (``DUETIME_COMMANDS``) the workers need, written to ``--commands-out``.

The translation is :mod:`duetime.importers.crontab`. A crontab with refused lines imports
nothing (each refused line is printed with its number and why; exit 2) unless
``--skip-refused``. Jobs are upserted under stable names, so importing the same crontab again
changes nothing; the allow-list file is merged (the file's other commands are kept) and
written before the jobs, so its names exist when the workers are deployed with it."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import typer

from duetime.app import AsyncApp
from duetime.app.importing import crontab, merge_allow_list, refused_specs, unserved
from duetime.cli._common import fail, refuse, with_app
from duetime.errors import ValidationError
from duetime.importers.crontab import CrontabImport


def import_crontab(
    file: str,
    *,
    commands_out: str | None,
    tz: str | None,
    system: bool,
    allow_shell: bool,
    skip_refused: bool,
    prefix: str,
    like_cron: bool,
    dry_run: bool,
    db: str | None,
    tenant: str,
    allow_unregistered: bool,
) -> None:
    """The CLI's crontab import (module docstring); ``file`` ``-`` reads stdin."""
    try:
        text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"{file}: cannot read it ({getattr(exc, 'strerror', None) or exc})")
    try:
        converted = crontab(
            text, tz=tz, system=system, allow_shell=allow_shell, prefix=prefix,
            like_cron=like_cron,
        )  # fmt: skip
    except ValidationError as exc:
        fail(str(exc))
    refuse([f"{file}: {r}" for r in converted.refused], f"line(s) of {file}", skip=skip_refused)
    for note in converted.notes:
        typer.echo(f"note: {note}", err=True)
    if dry_run:
        _show(converted)
        return
    if commands_out is None:
        fail(
            "--crontab needs --commands-out FILE: the allow-list (DUETIME_COMMANDS) the "
            "workers run these commands from"
        )
    out = commands_out

    async def body(app: AsyncApp) -> tuple[int, int, int]:
        bad = refused_specs(app, converted.specs)
        _drop(converted, bad, file, skip_refused)
        written = _write_commands(out, converted.commands)
        missing = [] if allow_unregistered else await unserved(app, converted.specs)
        if missing:
            fail(
                f"no worker serves the command {missing[0]!r} yet ({len(missing)} of "
                f"{len(converted.specs)} unserved; no job was written): deploy {out} "
                "as DUETIME_COMMANDS on the workers and start them, or pass "
                "--allow-unregistered (the jobs then wait for such a worker)"
            )
        created = 0
        for spec in converted.specs:
            try:
                job = await app.schedule(**spec, allow_unregistered=allow_unregistered)
            except ValidationError as exc:
                fail(f"line {spec['metadata']['crontab_line']}: {exc}")
            created += bool(job.created)
        return created, len(converted.specs) - created, written

    created, updated, written = with_app(db, tenant, body)
    typer.echo(
        f"imported {created + updated} jobs from {file} ({created} created, {updated} "
        f"updated); {commands_out} holds {written} commands: deploy it to the workers as "
        "DUETIME_COMMANDS"
    )


def _drop(
    converted: CrontabImport, bad: list[tuple[str, ValidationError]], file: str, skip: bool
) -> None:
    """Print the lines whose jobs ``app.schedule`` would refuse (``bad``), then stop before
    anything is written, or with ``skip`` (``--skip-refused``) leave them and their commands
    out of ``converted``."""
    lines = {spec["name"]: spec["metadata"]["crontab_line"] for spec in converted.specs}
    refuse(
        [f"{file}: line {lines[name]}: {exc}" for name, exc in bad], f"line(s) of {file}", skip=skip
    )
    names = {name for name, _ in bad}
    converted.specs = [spec for spec in converted.specs if spec["name"] not in names]
    for name in names:
        del converted.commands[name]


def _show(converted: CrontabImport) -> None:
    """What would be created: one line per job, then the allow-list entries."""
    for spec in converted.specs:
        typer.echo(f"would import {spec['name']}: cron {spec['cron']!r} in {spec['tz']}")
    typer.echo("allow-list entries (DUETIME_COMMANDS):")
    typer.echo(json.dumps(converted.commands, indent=2))


def _write_commands(path: str, commands: dict[str, dict[str, Any]]) -> int:
    """Merge ``commands`` into the allow-list file at ``path`` (created if missing), written
    atomically; returns how many commands the file holds."""
    target = Path(path)
    try:
        existing = target.read_text(encoding="utf-8") if target.exists() else None
        text = merge_allow_list(existing, commands)
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"--commands-out {path}: cannot read it ({exc})")
    except ValidationError as exc:
        fail(f"--commands-out {path}: {exc}")
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        os.fchmod(fd, _mode(target))  # mkstemp's 0600 would hide it from the workers' user
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, target)
    except OSError as exc:
        fail(f"--commands-out {path}: cannot write it ({exc.strerror})")
    return len(json.loads(text))


def _mode(target: Path) -> int:
    """The permissions the allow-list file keeps: its own if it exists, else a new file's
    (0666 less the umask)."""
    try:
        return target.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
