"""A zero-timeout look at a PostgreSQL connection's socket, no round trip."""

from __future__ import annotations

import select
from typing import Any

import psycopg


def has_unread_input(conn: psycopg.AsyncConnection[Any]) -> bool:
    """True if an idle connection's socket is readable (the server spoke unasked — a
    notification, an error — or closed it), failed, or the connection is already known to be
    closed or broken. ``poll`` where the platform has it (``select`` refuses descriptors above
    1023, which a busy process reaches), else ``select``."""
    if conn.closed or conn.broken:
        return True
    try:
        fd = conn.fileno()
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(fd, select.POLLIN | select.POLLPRI)
            return bool(poller.poll(0))
        readable, _, _ = select.select([fd], [], [], 0)
    except (OSError, ValueError, psycopg.Error):
        return True
    return bool(readable)
