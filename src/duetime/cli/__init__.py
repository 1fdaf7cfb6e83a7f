"""The ``duetime`` command line: thin commands over the same services as the Python API."""

from __future__ import annotations

from duetime.cli._root import cli


def main() -> None:
    cli()


__all__ = ["cli", "main"]
