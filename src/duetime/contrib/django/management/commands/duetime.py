"""``manage.py duetime …``: the ``duetime`` CLI with the project's ``DUETIME`` settings (the
``DUETIME_*`` variables they make); ``worker`` and ``up`` serve the project's tasks."""

from __future__ import annotations

import os
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from duetime.contrib.django import conf

SERVING = frozenset({"worker", "up"})
APP_SPEC = "duetime.contrib.django.runtime:app"


def delegate(args: list[str], prog: str = "manage.py duetime") -> int:
    """Run the duetime CLI with ``args``; its exit status."""
    from duetime.cli import cli

    os.environ.update(conf.environment())
    if args and args[0] in SERVING and "--app" not in args:
        args = [args[0], "--app", APP_SPEC, *args[1:]]
    try:
        cli(args=args, prog_name=prog, standalone_mode=True)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    return 0


class Command(BaseCommand):
    help = (
        "duetime's CLI with this project's settings: manage.py duetime migrate, "
        "manage.py duetime worker, manage.py duetime jobs list, … (manage.py duetime --help)"
    )

    def run_from_argv(self, argv: list[str]) -> None:
        """Every argument goes to the duetime CLI, options included (not Django's parser)."""
        sys.exit(delegate(argv[2:], prog=f"{os.path.basename(argv[0])} {argv[1]}"))

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("args", nargs="*", help="the duetime command and its arguments")

    def handle(self, *args: Any, **options: Any) -> None:
        status = delegate(list(args))
        if status:
            raise CommandError(f"duetime {' '.join(args)} exited with status {status}")
