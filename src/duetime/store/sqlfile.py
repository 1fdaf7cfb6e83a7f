"""Loads named SQL queries and numbered migrations shipped as ``.sql`` files.

A query file holds several statements, each introduced by a ``-- name: query_name`` line;
every dialect ships files with the same query names. Migrations are ``NNN_title.sql`` files,
applied in order and never edited once released.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: str


def load_queries(dialect: str) -> dict[str, str]:
    """All named queries of ``dialect`` (``sqlite`` or ``postgres``), by name."""
    queries: dict[str, str] = {}
    folder = resources.files(f"duetime.store.{dialect}").joinpath("queries")
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql"):
            continue
        text = entry.read_text(encoding="utf-8")
        parts = _NAME.split(text)
        for name, body in zip(parts[1::2], parts[2::2], strict=True):
            if name in queries:
                raise RuntimeError(f"duplicate query name {name!r} in {dialect} {entry.name}")
            queries[name] = body.strip().rstrip(";")
    return queries


def load_migrations(dialect: str) -> list[Migration]:
    folder = resources.files(f"duetime.store.{dialect}").joinpath("migrations")
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = re.fullmatch(r"(\d{3})_(\w+)\.sql", entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise RuntimeError(f"{dialect} migrations are not numbered 1..n: {versions}")
    return found
