"""Storage: the :class:`Store` protocol and its SQLite and PostgreSQL implementations."""

from __future__ import annotations

from duetime._clock import Clock
from duetime.store.base import SCHEMA_VERSION, Store

__all__ = ["SCHEMA_VERSION", "Store", "create_store", "is_postgres_url"]


def is_postgres_url(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://", "postgresql+psycopg://"))


def create_store(url: str, *, clock: Clock | None = None, create: bool = True) -> Store:
    """A store for ``url``: ``postgresql://…`` selects PostgreSQL, anything else is a SQLite
    path (or ``sqlite:///path``). The store is not opened yet: ``await store.open()``. With
    ``create`` false, opening a SQLite path where no database file is fails."""
    if is_postgres_url(url):
        from duetime.store.postgres.store import PostgresStore

        return PostgresStore(url, clock=clock)
    from duetime.store.sqlite.store import SQLiteStore

    return SQLiteStore(url, clock=clock, create=create)
