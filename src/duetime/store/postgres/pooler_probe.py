"""Is there a PgBouncer between a URL and PostgreSQL, and does it pool by transaction?

Nothing a client sees through PgBouncer says so (``SHOW pool_mode`` is a command of its admin
console, not of the databases it serves), so :func:`probe_pooler` looks at two signals:

* **shared server sessions**: two client connections, open at the same time, each run one
  statement in turn. Directly, and through session pooling, each client has its own server
  session: the two ``pg_backend_pid()`` always differ. Under transaction (or statement)
  pooling the server session goes back to the pool after each transaction, and PgBouncer
  hands the most recently used one to the next client: the pids match. Matching pids prove
  transaction pooling; differing ones do not disprove it (``server_round_robin = 1``, a busy
  pool), so three rounds are tried.
* **the admin console**: the same address with the database ``pgbouncer``. PostgreSQL answers
  ``database "pgbouncer" does not exist``; PgBouncer lets its admin and stats users in (then
  ``SHOW CONFIG`` gives ``pool_mode``) and refuses the others with ``not allowed``. A
  password failure or anything else says nothing.

Read-only and short: no transaction is left open, every connection is closed.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import psycopg
from psycopg.conninfo import make_conninfo

from duetime._redact import redact_url
from duetime.errors import ConnectError

ROUNDS = 3
CONNECT_TIMEOUT = 5


class Console(enum.StrEnum):
    """What the address said when asked for PgBouncer's admin console."""

    OPEN = "open"
    """PgBouncer's console answered (its ``pool_mode`` is known)."""
    REFUSED = "refused"
    """PgBouncer refused this user its console (``not allowed``)."""
    ABSENT = "absent"
    """PostgreSQL itself answered: no database ``pgbouncer``."""
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class PoolerProbe:
    """What :func:`probe_pooler` found at one URL."""

    shares_sessions: bool
    """Two client connections ran on one server session: transaction or statement pooling."""
    console: Console
    pool_mode: str | None = None
    """PgBouncer's default ``pool_mode`` when its console answered."""

    @property
    def pgbouncer(self) -> bool:
        """A PgBouncer (or another transaction pooler) is in front."""
        return self.shares_sessions or self.console in (Console.OPEN, Console.REFUSED)

    @property
    def transaction_pooling(self) -> bool:
        return self.shares_sessions or self.pool_mode in ("transaction", "statement")


async def probe_pooler(url: str) -> PoolerProbe:
    """Probe ``url`` (module docstring). Raises ConnectError when ``url`` itself cannot be
    connected to or the probe's statements fail."""
    try:
        shares = await _shares_sessions(url)
    except (psycopg.Error, OSError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise ConnectError(redact_url(url), reason, retryable=False) from None
    console, mode = await _console(url)
    return PoolerProbe(shares, console, mode)


async def _connect(conninfo: str) -> psycopg.AsyncConnection[tuple[object, ...]]:
    return await psycopg.AsyncConnection.connect(
        conninfo, autocommit=True, prepare_threshold=None, connect_timeout=CONNECT_TIMEOUT
    )


async def _pid(connection: psycopg.AsyncConnection[tuple[object, ...]]) -> object:
    row = await (await connection.execute("SELECT pg_backend_pid()")).fetchone()
    return row[0] if row else None


async def _shares_sessions(url: str) -> bool:
    first = await _connect(url)
    try:
        second = await _connect(url)
        try:
            for _ in range(ROUNDS):
                if await _pid(first) == await _pid(second):
                    return True
            return False
        finally:
            await second.close()
    finally:
        await first.close()


async def _console(url: str) -> tuple[Console, str | None]:
    try:
        connection = await _connect(make_conninfo(url, dbname="pgbouncer"))
    except (psycopg.Error, OSError) as exc:
        text = str(exc)
        if 'database "pgbouncer" does not exist' in text:
            return Console.ABSENT, None
        if "not allowed" in text:
            return Console.REFUSED, None
        return Console.UNKNOWN, None
    try:
        cursor = await connection.execute("SHOW CONFIG")
        mode = next((str(row[1]) for row in await cursor.fetchall() if row[0] == "pool_mode"), None)
        return Console.OPEN, mode
    except psycopg.Error:
        return Console.OPEN, None
    finally:
        await connection.close()
