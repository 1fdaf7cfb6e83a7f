"""The scheduler loop: materialize due occurrences into runs, tick after tick.

Safe with any number of schedulers at once: the store locks due jobs with SKIP LOCKED and the
database refuses a second run for the same (job, instant).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from duetime._aio import wait_or_stop
from duetime._config import Settings
from duetime.scheduler.planner import plan_job
from duetime.store.base import MaterializeResult, RunsMaterializeParams, Store

log = logging.getLogger("duetime.scheduler")


@dataclass(frozen=True, slots=True)
class TickResult:
    jobs: int
    runs_created: int
    skips: int


class Materializer:
    def __init__(
        self, store: Store, settings: Settings, *, partitions: tuple[int, int] | None = None
    ) -> None:
        self.store = store
        self.settings = settings
        self.partitions = partitions

    async def run_once(self) -> TickResult:
        """Materialize every job due within the horizon, batch after batch, until none is left."""
        jobs = created = skips = 0
        while True:
            result: MaterializeResult = await self.store.runs_materialize(
                RunsMaterializeParams(
                    planner=plan_job,
                    horizon=self.settings.scheduler_horizon,
                    limit=self.settings.scheduler_batch,
                    partitions=self.partitions,
                )
            )
            jobs += result.jobs
            created += result.runs_created
            skips += result.skips
            if result.jobs < self.settings.scheduler_batch:
                return TickResult(jobs, created, skips)

    async def run(self, stop: asyncio.Event) -> None:
        """Tick every ``scheduler_tick`` seconds until ``stop`` is set. A failed tick (database
        down) is logged and retried with backoff; it never ends the loop."""
        failures = 0
        while not stop.is_set():
            try:
                result = await self.run_once()
                failures = 0
                if result.runs_created or result.skips:
                    log.debug(
                        "materialized %d runs (%d skips) for %d jobs",
                        result.runs_created,
                        result.skips,
                        result.jobs,
                    )
                delay = self.settings.scheduler_tick
            except Exception:
                failures += 1
                delay = min(30.0, self.settings.scheduler_tick * 2**failures)
                log.exception(
                    "scheduler tick failed (%d in a row); retrying in %.1fs", failures, delay
                )
            await wait_or_stop(stop, delay)
