"""The outbox relay (docs/brokers.md, decision 0026): publishes the pending messages of the
broker connections this process serves, and marks them sent, retried or dead.

Every worker process with broker connections runs one; any number may run at once. A pass
(:meth:`Relay.run_once`) claims a batch (``outbox_claim``: ``FOR UPDATE SKIP LOCKED`` on
PostgreSQL, each row hidden for ``lease`` seconds), publishes each connection's rows pipelined
through its publisher, concurrently across connections, then writes the verdicts: sent rows
marked ``sent_at``, refused ones moved to the dead-message list, the others put back after
the connection's own backoff (exponential with full jitter, from :data:`BACKOFF_BASE` to
:data:`BACKOFF_CAP` while its failures continue). A relay that dies between publish and mark
leaves its rows to be claimed again when their lease runs out: they are published again with
the same message id (at-least-once; duplicates are documented in docs/brokers.md).

A batch's publish is bounded by its lease (decision 0040): its publishers must answer by the
claim's start + lease − :func:`margin`, or :data:`PUBLISH_CAP` after it if sooner (connect,
send, confirms; rows unanswered by then are retried and the connection dropped,
``targets/brokers/publish.py``). The relay waits for them until half the margin is left; a
connection that has not answered by then has its rows retried and its publisher dropped
(closed in the background), while the other connections' answers are kept. The verdicts are
written only if that instant has not passed when their marks begin: otherwise another relay
may hold the rows already, and they are left to it (a batch whose claim returned after its
deadline is not even published).

While a connection is backing off, the relay does not claim its rows. Every
:data:`DEPTH_EVERY` seconds it reads the outbox's depth into the metrics gauges."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from duetime._aio import first_of
from duetime._outbox import OutboxClaimParams, OutboxRetry, OutboxRow
from duetime.metrics import Metrics, metrics
from duetime.store import Store
from duetime.targets.brokers.checks import check_connections
from duetime.targets.brokers.config import BrokerConnection
from duetime.targets.brokers.publish import (
    Publisher,
    Resolve,
    Result,
    Verdict,
    describe,
    open_publisher,
)
from duetime.targets.secrets import redact, resolve_secrets

log = logging.getLogger("duetime.relay")

BACKOFF_BASE = 0.5
BACKOFF_CAP = 60.0
MARGIN_SHARE = 0.25
MARGIN_CAP = 5.0
PUBLISH_CAP = 10.0
"""Seconds a batch's publishers have at most, whatever the lease (a broker that does not
answer holds up the relay's next claim this long)."""
CLOSE_WAIT = 5.0
"""Seconds :meth:`Relay.close` waits for its broker connections to close."""
DEPTH_EVERY = 10.0
IDLE_POLL = 0.5
"""Seconds between claims while the outbox is empty (a completion in this process wakes the
relay at once; on PostgreSQL, so does another process's commit of outbox rows: NOTIFY
``duetime_outbox``)."""


def margin(lease: float) -> float:
    """The part of a batch's lease kept back from its publish (:data:`MARGIN_SHARE` of it, at
    most :data:`MARGIN_CAP` seconds): half for the relay to give up on a connection that does
    not answer, half to begin the marks."""
    return min(lease * MARGIN_SHARE, MARGIN_CAP)


@dataclass(frozen=True, slots=True)
class RelayPass:
    """What one pass did."""

    claimed: int = 0
    sent: int = 0
    retried: int = 0
    dead: int = 0
    lapsed: int = 0
    """Rows whose verdicts were not written: their lease may have been taken meanwhile."""


@dataclass(slots=True)
class _Published:
    """A claimed batch after its publish: each row's verdict, to be written."""

    claimed: int
    mark_by: float = float("inf")
    """Loop time after which the batch's lease may be another relay's: no mark is begun."""
    sent: list[int] = field(default_factory=list)
    retries: list[OutboxRetry] = field(default_factory=list)
    dead: list[tuple[int, str]] = field(default_factory=list)


class Relay:
    def __init__(
        self,
        store: Store,
        connections: Mapping[str, BrokerConnection],
        *,
        batch: int = 500,
        lease: float = 30.0,
        resolve: Resolve | None = None,
        registry: Metrics | None = None,
        rng: random.Random | None = None,
        opener: Callable[[BrokerConnection, Resolve], Publisher] = open_publisher,
    ) -> None:
        self.store = store
        self.connections = dict(connections)
        self.batch = batch
        self.lease = lease
        self._resolve = resolve or self._resolve_secrets
        self._hidden: set[str] = set()
        """Secret values and URL passwords this relay connected with: kept out of errors."""
        self._metrics = registry
        self._rng = rng or random.Random()
        self._opener = opener
        self._publishers: dict[str, Publisher] = {}
        self._background: set[asyncio.Task[Any]] = set()
        """Publishes given up on and closes of dropped publishers, still running."""
        self._failures: dict[str, int] = {}
        self._resume_at: dict[str, float] = {}
        """A backing-off connection: when (monotonic) its rows are claimed again."""
        self._wake = asyncio.Event()
        self._depth_at = float("-inf")

    def _resolve_secrets(self, value: Any) -> Any:
        """A connection's value with its secret references resolved (``targets/secrets.py``);
        the secrets, and a URL's password, are remembered to be redacted from errors."""
        resolved = resolve_secrets(value)
        self._hidden.update(resolved.secrets)
        if isinstance(resolved.value, str):
            with contextlib.suppress(ValueError):
                if password := urlsplit(resolved.value).password:
                    self._hidden.add(password)
        return resolved.value

    def wake(self) -> None:
        """A broker run's message may have been committed: claim now."""
        self._wake.set()

    async def run_once(self) -> RelayPass:
        """Claim one batch, publish it, write the verdicts."""
        return await self._mark(await self._claim_and_publish())

    async def _claim_and_publish(self) -> _Published:
        """Claim one batch and publish it: the verdicts, not yet written (the rows stay
        leased until they are), bounded by the lease (module docstring)."""
        loop = asyncio.get_running_loop()
        start = loop.time()  # before the claim: its lease ends later than start + lease
        serving = [n for n in self.connections if self._resume_at.get(n, 0.0) <= time.monotonic()]
        rows = await self.store.outbox_claim(
            OutboxClaimParams(connections=serving, limit=self.batch, lease=self.lease)
        )
        kept_back = margin(self.lease)
        deadline = start + min(self.lease - kept_back, PUBLISH_CAP)
        done = _Published(len(rows), mark_by=deadline + kept_back / 2)
        if not rows:
            return done
        if loop.time() >= deadline:  # the claim took the time: not published, not marked
            return _Published(len(rows), mark_by=float("-inf"))
        groups: dict[str, list[OutboxRow]] = {}
        for row in rows:
            groups.setdefault(row.connection, []).append(row)
        tasks = [asyncio.ensure_future(self._publish(n, g, deadline)) for n, g in groups.items()]
        try:
            _, late = await asyncio.wait(tasks, timeout=max(0.0, done.mark_by - loop.time()))
        except BaseException:
            late = set(tasks)
            raise
        finally:
            for task in late:
                task.cancel()
                self._keep(task)
        for (name, group), task in zip(groups.items(), tasks, strict=True):
            if task in late:
                self._drop(name)
                unanswered = f"TimeoutError: no answer within the outbox lease ({self.lease:g} s)"
                results = [Result(Verdict.RETRY, unanswered)] * len(group)
            else:
                results = task.result()
            delay = self._settle(name, results)
            for row, result in zip(group, results, strict=True):
                error = redact(result.error, self._hidden)
                if result.verdict is Verdict.SENT:
                    done.sent.append(row.id)
                elif result.verdict is Verdict.DEAD:
                    done.dead.append((row.id, error))
                else:
                    done.retries.append(OutboxRetry(row.id, delay, error))
        return done

    async def _mark(self, done: _Published) -> RelayPass:
        """Write a batch's verdicts: sent, dead, put back for later; none once its lease may
        have been taken (``done.mark_by`` passed: the rows are left to whoever holds them)."""
        if asyncio.get_running_loop().time() > done.mark_by:
            log.warning(
                "outbox relay: %d messages left unmarked, their lease may have ended; "
                "they will be published again",
                done.claimed,
            )
            return RelayPass(done.claimed, lapsed=done.claimed)
        await self.store.outbox_sent(done.sent)
        await self.store.outbox_dead(done.dead)
        await self.store.outbox_retry(done.retries)
        for row_id, error in done.dead:
            log.warning("outbox message %d refused for good (dead): %s", row_id, error)
        return RelayPass(done.claimed, len(done.sent), len(done.retries), len(done.dead))

    async def _publish(self, name: str, rows: Sequence[OutboxRow], deadline: float) -> list[Result]:
        publisher = self._publishers.get(name)
        if publisher is None:
            publisher = self._publishers[name] = self._opener(self.connections[name], self._resolve)
        try:
            results = await publisher.publish(rows, deadline)
        except Exception as exc:
            return [Result(Verdict.RETRY, describe(exc))] * len(rows)
        assert len(results) == len(rows)
        return results

    def _drop(self, name: str) -> None:
        """Forget a connection's publisher (its next batch opens a new one); it closes in the
        background."""
        publisher = self._publishers.pop(name, None)
        if publisher is not None:
            self._keep(asyncio.ensure_future(_closed(publisher)))

    def _keep(self, task: asyncio.Task[Any]) -> None:
        """Hold a background task until it ends (its end, whatever it is, is not awaited)."""
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _settle(self, name: str, results: Sequence[Result]) -> float:
        """Note a connection's batch: a batch with nothing delivered (all retried) extends its
        failure streak and its backoff; anything else ends them. Returns the retry delay."""
        if results and all(r.verdict is Verdict.RETRY for r in results):
            failures = self._failures[name] = self._failures.get(name, 0) + 1
            delay = self._rng.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2**failures))
            delay = max(delay, BACKOFF_BASE)
            self._resume_at[name] = time.monotonic() + delay
            if failures in (1, 5) or failures % 20 == 0:
                log.warning(
                    "broker connection %r failing (%d batches in a row), retrying in %.1fs: %s",
                    name,
                    failures,
                    delay,
                    redact(results[0].error, self._hidden),
                )
            return delay
        if self._failures.pop(name, 0):
            log.info("broker connection %r publishes again", name)
        self._resume_at.pop(name, None)
        return BACKOFF_BASE

    async def check_duplicate_windows(self) -> list[str]:
        """At start: warn (log) about NATS connections whose JetStream streams dedupe over less
        than the configured ``duplicate_window`` (as ``duetime doctor`` does). Returns the
        warnings; a broker that does not answer yet is left to the relay's retries."""
        watched = {
            n: c
            for n, c in self.connections.items()
            if c.type == "nats" and c.duplicate_window is not None
        }
        warnings = []
        for check in await check_connections(watched, self._resolve):
            if check.level != "ok" and "duplicate_window" in check.detail:
                warnings.append(f"broker connection {check.connection!r}: {check.detail}")
                log.warning("%s", warnings[-1])
        return warnings

    async def observe_depth(self) -> None:
        """Read the outbox's depth into the metrics gauges."""
        depth = await self.store.outbox_depth()
        now = await self.store.db_now()
        (self._metrics or metrics()).outbox_observed(depth, now)

    async def run(self, stop: asyncio.Event) -> None:
        """Pass after pass until ``stop``: at once after a full batch, else on a wake-up (this
        process's completion, or another's NOTIFY: ``store.wait_for_outbox``) or after
        :data:`IDLE_POLL`. A pass's verdicts are written while the next pass claims and
        publishes (its rows stay leased until then, so no other pass takes them); at most one
        batch's marks are in flight, and they are written before the relay stops. A store
        that is unreachable pauses the relay (backoff)."""
        errors = 0
        marking: asyncio.Task[RelayPass] | None = None
        await self.check_duplicate_windows()
        try:
            while not stop.is_set():
                self._wake.clear()
                try:
                    done = await self._claim_and_publish()
                    previous, marking = marking, None
                    try:
                        if previous is not None:
                            await previous
                    finally:  # the last batch's marks failed: this one's are written all the same
                        if done.claimed:
                            marking = asyncio.create_task(
                                self._mark(done), name="duetime-relay-mark"
                            )
                    if time.monotonic() - self._depth_at >= DEPTH_EVERY:
                        self._depth_at = time.monotonic()
                        await self.observe_depth()
                    errors = 0
                except self.store.transient_errors as exc:
                    await self._finish(marking)  # rows left unmarked are published again
                    marking = None  # when their lease ends
                    errors += 1
                    pause = min(BACKOFF_CAP, BACKOFF_BASE * 2**errors)
                    log.warning(
                        "outbox relay: database unreachable (%s); again in %.1fs", exc, pause
                    )
                    await first_of(stop.wait(), asyncio.sleep(pause))
                    continue
                if done.claimed >= self.batch:
                    continue
                await first_of(
                    stop.wait(), self._wake.wait(), self.store.wait_for_outbox(IDLE_POLL)
                )
        finally:
            try:
                await self._finish(marking)
            finally:
                await self.close()

    async def _finish(self, marking: asyncio.Task[RelayPass] | None) -> None:
        """Wait for a batch's marks being written; a failure to reach the store leaves its
        rows to be published again when their lease ends (at least once)."""
        if marking is not None:
            with contextlib.suppress(*self.store.transient_errors):
                await marking

    async def close(self) -> None:
        """Close the broker connections, those dropped included, waiting for them at most
        :data:`CLOSE_WAIT` seconds (a broker that does not answer holds a polite close)."""
        for name in list(self._publishers):
            self._drop(name)
        if self._background:
            await asyncio.wait(self._background, timeout=CLOSE_WAIT)


async def _closed(publisher: Publisher) -> None:
    try:
        await publisher.close()
    except Exception as exc:  # closing a broken connection
        log.debug("closing a publisher: %s", exc)
