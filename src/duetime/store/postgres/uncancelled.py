"""A psycopg connection that never sends a cancel request, for PgBouncer's transaction pooling.

psycopg answers a task cancelled in the middle of a statement (a worker's loops at shutdown,
a timeout) with a cancel request on a new connection. PgBouncer 1.18 can exit on one
(``FATAL … disconnect_client(): bad client state: 0`` when the cancelling client closes first,
pgbouncer/pgbouncer#801; seen in this project's tests at a worker's shutdown), taking every
process's connections with it. Here the request is never sent: psycopg then waits up to 5 s
for the statement to end (duetime's are short) and otherwise closes the connection, which
PgBouncer handles by closing its server connection.
"""

from __future__ import annotations

from typing import Any

import psycopg


class UncancelledConnection(psycopg.AsyncConnection[Any]):
    """:meth:`cancel_safe` does nothing (the module docstring says why)."""

    async def cancel_safe(self, *, timeout: float = 30.0) -> None:
        return None
