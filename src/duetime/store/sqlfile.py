"""Loads named SQL queries and numbered migrations shipped as ``.sql`` files.

A query file holds several statements, each introduced by a ``-- name: query_name`` line;
every dialect ships files with the same query names. A ``-- fragment: fragment_name`` block
is a piece of SQL (a CTE shared by several queries, say) that queries of the same dialect,
in any of its files, include as ``{{fragment_name}}``: it is expanded when the queries load,
so a dialect writes it once. A fragment does not include another; a reference to an unknown
fragment, or a fragment no query includes, fails the load. Migrations are ``NNN_title.sql``
files, applied in order and never edited once released.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import LiteralString

_BLOCK = re.compile(r"^--\s*(name|fragment):\s*(\w+)\s*$", re.MULTILINE)
_INCLUDE = re.compile(r"\{\{\s*(\w+)\s*\}\}")
_STOPS_NODES = re.compile(r"^--\s*requires:\s*nodes stopped\s*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    sql: LiteralString
    """Shipped with the package, never built from input: safe to execute as is."""

    @property
    def stops_nodes(self) -> bool:
        """Marked ``-- requires: nodes stopped``: the previous release cannot run beside it."""
        return _STOPS_NODES.search(self.sql) is not None


def load_queries(dialect: str) -> dict[str, LiteralString]:
    """All named queries of ``dialect`` (``sqlite`` or ``postgres``), by name, their
    ``{{fragment}}`` includes expanded."""
    folder = resources.files(f"duetime.store.{dialect}").joinpath("queries")
    files = {
        entry.name: entry.read_text(encoding="utf-8")
        for entry in folder.iterdir()
        if entry.name.endswith(".sql")
    }
    return parse_queries(files, dialect)


def parse_queries(files: Mapping[str, LiteralString], dialect: str) -> dict[str, LiteralString]:
    """The named queries of query ``files`` (file name → text, read in name order) with
    their fragments expanded; RuntimeError, naming the file, for a duplicate name, an
    unknown or nested include, or a fragment no query includes."""
    queries: dict[str, LiteralString] = {}
    fragments: dict[str, LiteralString] = {}
    where: dict[str, str] = {}
    for file in sorted(files):
        parts = _BLOCK.split(files[file])
        for kind, name, body in zip(parts[1::3], parts[2::3], parts[3::3], strict=True):
            if name in queries or name in fragments:
                raise RuntimeError(f"duplicate name {name!r} in {dialect} {file}")
            found = queries if kind == "name" else fragments
            found[name] = body.strip().rstrip(";")
            where[name] = file
    for name, body in fragments.items():
        if _INCLUDE.search(body):
            raise RuntimeError(
                f"{dialect} fragment {name!r} ({where[name]}) includes another: fragments do "
                "not nest"
            )
    used: set[str] = set()
    for name, body in queries.items():
        queries[name] = _expand(body, fragments, used, f"{dialect} query {name!r} ({where[name]})")
    unused = sorted(fragments.keys() - used)
    if unused:
        raise RuntimeError(f"{dialect} fragment {unused[0]!r} is included by no query")
    return queries


def _expand(
    body: LiteralString, fragments: dict[str, LiteralString], used: set[str], what: str
) -> LiteralString:
    """``body`` with each ``{{fragment}}`` replaced by that fragment's text."""

    def include(match: re.Match[str]) -> str:
        name = match[1]
        if name not in fragments:
            known = ", ".join(sorted(fragments)) or "none"
            raise RuntimeError(f"{what} includes unknown fragment {name!r} (known: {known})")
        used.add(name)
        return fragments[name]

    return _INCLUDE.sub(include, body)


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
