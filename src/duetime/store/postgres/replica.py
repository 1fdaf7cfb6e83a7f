"""A PostgreSQL store opened on a streaming replica, for reads only (``store/reads.py``).

Every connection starts with ``default_transaction_read_only=on`` (sent as a startup option,
so it holds from the first statement and a ``RESET ALL`` cannot lose it): a write is refused
by PostgreSQL itself ("cannot execute … in a read-only transaction"), whether the URL names a
hot standby (which refuses writes anyway) or, by mistake, a primary. Opening checks that the
setting took and that the schema is duetime's at this version.
"""

from __future__ import annotations

import logging
from typing import Any

from psycopg.rows import tuple_row

from duetime._redact import redact_url
from duetime.errors import ValidationError
from duetime.store.postgres.pooling import Pooling
from duetime.store.postgres.store import PostgresStore

log = logging.getLogger("duetime")

READ_ONLY_OPTION = "-c default_transaction_read_only=on"


class ReadOnlyPooling(Pooling):
    """A direct pool whose every connection is read-only (:data:`READ_ONLY_OPTION`)."""

    __slots__ = ()

    def connection_kwargs(self) -> dict[str, Any]:
        return {**super().connection_kwargs(), "options": READ_ONLY_OPTION}


async def open_read_only(url: str, pooling: Pooling) -> PostgresStore:
    """The replica at ``url`` opened read-only (``store.reads.open_replica`` tells the
    contract)."""
    if not url.startswith(("postgresql://", "postgres://", "postgresql+psycopg://")):
        raise ValidationError(
            "replica_url", f"must be a postgresql:// URL, got {redact_url(url)!r}"
        )
    pooled = ReadOnlyPooling(pool_size=pooling.pool_size, checkout_wait=pooling.checkout_wait)
    store = PostgresStore(url, pooling=pooled)
    await store.open()
    try:
        await store.check_schema()
        async with store.pool.connection() as conn:
            cursor = conn.cursor(row_factory=tuple_row)
            await cursor.execute(
                "SELECT current_setting('default_transaction_read_only'), pg_is_in_recovery()"
            )
            row = await cursor.fetchone()
        if row is None or row[0] != "on":
            raise ValidationError(
                "replica_url", f"{redact_url(url)} did not accept a read-only session"
            )
        kind = "a standby" if row[1] else "not a standby (a primary: read-only sessions)"
        log.info("reading list pages and gauges from the replica %s, %s", redact_url(url), kind)
    except BaseException:
        await store.close()
        raise
    return store
