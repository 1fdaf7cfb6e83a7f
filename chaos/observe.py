"""Watching the cluster while the chaos runs: the ``leader``, ``nodes`` and ``workers`` tables
are polled a few times a second (reconnecting through PostgreSQL restarts). Every leadership
term seen is kept, with the node that held it and when the database says it was elected; and
for every pid, when it first showed up registered (a scheduler's node, a worker's worker row):
from then on the process is *ready*."""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from datetime import datetime

import psycopg


@dataclass
class Term:
    term: int
    node_id: str
    elected_at: datetime
    expires_at: datetime

    @property
    def pid(self) -> int | None:
        """The pid in the node id ``host:pid:hex``."""
        parts = self.node_id.rsplit(":", 2)
        try:
            return int(parts[-2])
        except (IndexError, ValueError):
            return None


class LeaderWatch(threading.Thread):
    def __init__(self, url: str, *, every: float = 0.2) -> None:
        super().__init__(name="chaos-leader-watch", daemon=True)
        self.url = url
        self.every = every
        self.terms: dict[int, Term] = {}
        self.ready: dict[int, float] = {}
        """pid → when it was first seen registered (``time.time()``)."""
        self.polls = 0
        self.failed_polls = 0
        self._halt = threading.Event()
        self._lock = threading.Lock()

    def current(self) -> Term | None:
        with self._lock:
            return self.terms[max(self.terms)] if self.terms else None

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=10)

    def run(self) -> None:
        conn: psycopg.Connection | None = None
        while not self._halt.is_set():
            try:
                if conn is None or conn.closed:
                    conn = psycopg.connect(self.url, autocommit=True, connect_timeout=2)
                row = conn.execute(
                    "SELECT term, node_id, elected_at, expires_at FROM leader "
                    "WHERE name = 'default'"
                ).fetchone()
                registered = conn.execute(
                    "SELECT pid FROM nodes WHERE roles @> '[\"scheduler\"]' "
                    "UNION SELECT pid FROM workers"
                ).fetchall()
                self.polls += 1
                if row is not None:
                    self._see(Term(int(row[0]), row[1], row[2], row[3]))
                seen = time.time()
                for (pid,) in registered:
                    self.ready.setdefault(int(pid), seen)
            except psycopg.Error:
                self.failed_polls += 1
                if conn is not None:
                    with contextlib.suppress(Exception):
                        conn.close()
                conn = None
            self._halt.wait(self.every)
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _see(self, term: Term) -> None:
        with self._lock:
            known = self.terms.get(term.term)
            if known is None:
                self.terms[term.term] = term
            else:
                known.expires_at = max(known.expires_at, term.expires_at)
