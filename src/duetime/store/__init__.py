"""Storage: the :class:`Store` protocol and its SQLite and PostgreSQL implementations."""

from __future__ import annotations

from typing import TYPE_CHECKING

from duetime._clock import Clock
from duetime.store.base import SCHEMA_VERSION, Store
from duetime.store.postgres.pooling import Pooling

if TYPE_CHECKING:
    from duetime.store.postgres.pooler_probe import PoolerProbe

__all__ = [
    "SCHEMA_VERSION",
    "Pooling",
    "Store",
    "create_store",
    "is_postgres_url",
    "probe_pooler",
]


def is_postgres_url(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://", "postgresql+psycopg://"))


def create_store(
    url: str, *, clock: Clock | None = None, create: bool = True, pooling: Pooling | None = None
) -> Store:
    """A store for ``url``: ``postgresql://…`` selects PostgreSQL, anything else is a SQLite
    path (or ``sqlite:///path``). The store is not opened yet: ``await store.open()``. With
    ``create`` false, opening a SQLite path where no database file is fails. ``pooling``
    (PostgreSQL only): PgBouncer's mode, the listen URL, the pool's size
    (docs/howto/pgbouncer.md)."""
    if is_postgres_url(url):
        from duetime.store.postgres.store import PostgresStore

        return PostgresStore(url, clock=clock, pooling=pooling)
    from duetime.store.sqlite.store import SQLiteStore

    return SQLiteStore(url, clock=clock, create=create)


async def probe_pooler(url: str) -> PoolerProbe:
    """Whether a PgBouncer sits in front of the PostgreSQL ``url`` and pools by transaction
    (:mod:`duetime.store.postgres.pooler_probe`, for ``duetime doctor``)."""
    from duetime.store.postgres.pooler_probe import probe_pooler as probe

    return await probe(url)
