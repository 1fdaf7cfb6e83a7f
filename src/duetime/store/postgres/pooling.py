"""How a PostgreSQL store reaches its database: directly (or through a session pooler), or
through PgBouncer in *transaction* pooling mode (docs/howto/pgbouncer.md, decision 0029).

In transaction pooling a client's consecutive transactions may run on different server
sessions, so the store keeps nothing in a session between transactions:

- no prepared statements (psycopg's ``prepare_threshold=None``: a statement prepared on one
  server session is unknown on the next);
- no session settings: ``jit`` is left to the role (``ALTER ROLE … SET jit = off``); the time
  zone is still set per connection, as PgBouncer tracks ``TimeZone`` for each client and
  restores it on whichever server session serves it;
- no session advisory locks (duetime takes only ``pg_advisory_xact_lock``) and ``SET LOCAL``
  only inside a transaction;
- no cancel requests (``uncancelled.py``: PgBouncer 1.18 can exit on one);
- notifications (``LISTEN``: new runs, cancellations, API key news) only on a direct
  connection, the *listen URL*; without one the store polls: workers claim every
  ``worker_poll_interval``, runs asked to stop are found at the next heartbeat, API keys are
  read on every request.

Connections per process: at most ``pool_size`` through the pooler plus, with a listen URL, two
direct ones (runs and cancellations; API key news, opened by the API only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from duetime._config import Settings
from duetime._redact import redact_url
from duetime.errors import ValidationError

if TYPE_CHECKING:
    import psycopg

MODES = ("", "session", "transaction")
"""``pgbouncer`` values: none (a direct connection), session pooling (the same as direct for
duetime), transaction pooling."""

DEFAULT_POOL_SIZE = 10


@dataclass(frozen=True, slots=True)
class Pooling:
    """The connection choices of one PostgreSQL store.

    ``pgbouncer``: one of :data:`MODES`. ``listen_url``: a direct connection for ``LISTEN``
    (empty: the database URL itself, except in transaction pooling where it means polling).
    ``pool_size``: the most pooled connections the store opens. ``checkout_wait``: seconds a
    call waits for one of them before the pool's ``PoolTimeout`` (a transient error)."""

    pgbouncer: str = ""
    listen_url: str = ""
    pool_size: int = DEFAULT_POOL_SIZE
    checkout_wait: float = 30.0

    def __post_init__(self) -> None:
        if self.pgbouncer not in MODES:
            raise ValidationError(
                "pgbouncer", f"must be empty, 'session' or 'transaction', got {self.pgbouncer!r}"
            )
        if self.pool_size < 1:
            raise ValidationError("database_pool_size", f"must be >= 1, got {self.pool_size!r}")
        if self.listen_url and not self.listen_url.startswith(("postgresql://", "postgres://")):
            raise ValidationError(
                "listen_url", f"must be a postgresql:// URL, got {redact_url(self.listen_url)!r}"
            )

    @classmethod
    def of(cls, settings: Settings) -> Pooling:
        """The choices ``settings`` make (``pgbouncer``, ``listen_url``, ``database_pool_size``,
        ``database_checkout_wait``)."""
        return cls(
            settings.pgbouncer,
            settings.listen_url,
            settings.database_pool_size,
            settings.database_checkout_wait,
        )

    @property
    def transaction_pooling(self) -> bool:
        return self.pgbouncer == "transaction"

    def connection_kwargs(self) -> dict[str, Any]:
        """Extra keyword arguments of every pooled connection."""
        return {"prepare_threshold": None} if self.transaction_pooling else {}

    def connection_class(self) -> type[psycopg.AsyncConnection[Any]]:
        """The class of every connection through the database URL: under transaction pooling
        one that sends no cancel requests (``uncancelled.py``)."""
        if self.transaction_pooling:
            from duetime.store.postgres.uncancelled import UncancelledConnection

            return UncancelledConnection
        import psycopg

        return psycopg.AsyncConnection

    def listen_target(self, database_url: str) -> str | None:
        """Where to ``LISTEN``: the listen URL, else the database URL unless transaction
        pooling makes that useless (None: poll)."""
        if self.listen_url:
            return self.listen_url
        return None if self.transaction_pooling else database_url

    def describe(self, database_url: str) -> str | None:
        """The line logged when the store opens (None for a plain direct connection)."""
        listen = self.listen_target(database_url)
        if self.transaction_pooling:
            head = (
                f"PgBouncer transaction pooling at {redact_url(database_url)}: no prepared "
                f"statements, no session state, at most {self.pool_size} pooled connections"
            )
            if listen is None:
                return (
                    f"{head}; no listen URL (DUETIME_LISTEN_URL): polling — workers claim every "
                    "worker_poll_interval, runs asked to stop are found at the next heartbeat, "
                    "API keys are read on every request"
                )
            return f"{head}; notifications from a direct connection to {redact_url(listen)}"
        if self.listen_url:
            return f"notifications from a direct connection to {redact_url(self.listen_url)}"
        return None
