"""``app.bulk``: bulk registration — many jobs validated and written at once, the database
writing one batch while the next is validated (docs/architecture.md, docs/decisions/0007)."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import fields as dataclass_fields
from itertools import islice
from typing import Any

from duetime._audit import AuditEntry
from duetime._types import DeliveryMode
from duetime.app._service import Service, check_task, check_workflow
from duetime.app.calendars import Calendars
from duetime.errors import ValidationError
from duetime.registration import BulkValidator, JobSpec
from duetime.store.base import BulkJob, JobsInsertManyParams

BULK_FIRST_BATCH = 1000
"""The first batch of :meth:`Bulk.schedule_many`; each next one is twice as large, up to
``batch_size``, so the database is writing while most of a small call is validated."""
BULK_CHUNK = 100
"""Specs :meth:`Bulk.schedule_many` validates between turns of the event loop; short turns
keep the COPY of the batch being written streaming to the database meanwhile."""

_SPEC_FIELDS = frozenset(f.name for f in dataclass_fields(JobSpec))


def spec_from_mapping(item: Mapping[str, Any]) -> JobSpec:
    """A :class:`JobSpec` from a mapping of its fields. Raises ValidationError."""
    if not isinstance(item, Mapping):
        raise ValidationError("spec", "must be a JobSpec or a mapping of its fields")
    unknown = sorted(set(item) - _SPEC_FIELDS)
    if unknown:
        raise ValidationError(unknown[0], "is not a job field")
    if "name" not in item:
        raise ValidationError("name", "is required")
    values = dict(item)
    if "tags" in values and values["tags"] is not None:
        values["tags"] = tuple(values["tags"])
    return JobSpec(**values)


class Bulk(Service):
    """Bulk registration for one tenant (``app.bulk``)."""

    __slots__ = ()

    async def schedule_many(
        self,
        specs: Iterable[JobSpec | Mapping[str, Any]],
        *,
        allow_unregistered: bool = False,
        batch_size: int = 10_000,
    ) -> int:
        """Create many jobs at once (bulk registration); return how many were created.

        Each spec is a :class:`~duetime.registration.JobSpec` or a mapping of its fields
        (``{"name": …, "task": …, "cron": …}``), validated like ``app.schedule``. A name that
        exists already is left as it is: bulk registration only creates (use ``schedule`` to
        change a job). Specs are written in transactions of up to ``batch_size`` (the first
        of 1,000, each next one twice as large) while the next batch is validated. An invalid
        spec raises ValidationError naming it (``specs[3].cron``);
        nothing of its batch is written, earlier batches are.

        One audit record for the call (``created``, with the count), written once its last
        batch has committed — or, when it fails, for the batches that did (its batches are
        transactions of their own: docs/decisions/0021)."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValidationError("batch_size", f"must be a whole number >= 1, got {batch_size!r}")
        tally = [0]  # jobs created by the batches that committed
        try:
            return await self._insert_all(specs, allow_unregistered, batch_size, tally)
        finally:
            if tally[0]:
                await self.store.audit_record(
                    AuditEntry(
                        self.tenant, self.actor, "created", "jobs", change={"created": tally[0]}
                    )
                )

    async def _insert_all(
        self,
        specs: Iterable[JobSpec | Mapping[str, Any]],
        allow_unregistered: bool,
        batch_size: int,
        tally: list[int],
    ) -> int:
        validator = BulkValidator(tenant=self.tenant, settings=self.settings, now=self.clock.now())
        checked: set[str] = set()
        calendars_checked: set[tuple[str, ...]] = set()
        batch: list[BulkJob] = []
        created = finished = 0  # jobs created by, and jobs sent in, the writes that finished
        writing: asyncio.Future[int] | None = None
        written = 0  # jobs in the batch being written
        limit = min(batch_size, BULK_FIRST_BATCH)  # doubles per batch: writing starts early
        items = enumerate(specs)
        try:
            while chunk := self._chunk(items, validator, min(BULK_CHUNK, limit - len(batch))):
                for index, job in chunk:
                    task = job.shape.task
                    if task not in checked:
                        try:
                            await check_task(self._scope, task, allow_unregistered)
                        except ValidationError as exc:
                            field = f"specs[{index}].{exc.field}"
                            raise ValidationError(field, exc.reason) from None
                        checked.add(task)
                    if job.shape.target is not None and job.shape.target.get("type") == "workflow":
                        try:
                            await check_workflow(self._scope, job.shape.target)
                        except ValidationError as exc:
                            field = f"specs[{index}].{exc.field}"
                            raise ValidationError(field, exc.reason) from None
                    if job.shape.calendars not in calendars_checked:
                        try:
                            await Calendars(self._scope).check_known(job.shape.calendars)
                        except ValidationError as exc:
                            raise ValidationError(f"specs[{index}].calendars", exc.reason) from None
                        calendars_checked.add(job.shape.calendars)
                    batch.append(job)
                if len(batch) >= limit:
                    if writing is not None:
                        created, finished = created + await writing, finished + written
                        tally[0] = created
                    # straight into jobs while every name so far was new
                    params = JobsInsertManyParams(batch, expect_new=created == finished)
                    writing = asyncio.ensure_future(self.store.jobs_insert_many(params))
                    written, batch = len(batch), []
                    limit = min(batch_size, limit * 2)
                await asyncio.sleep(0)  # let the batch being written stream meanwhile
        finally:
            if writing is not None:
                created, finished = created + await writing, finished + written
                tally[0] = created
        if batch:
            params = JobsInsertManyParams(batch, expect_new=created == finished)
            created += await self.store.jobs_insert_many(params)
            tally[0] = created
        return created

    def _chunk(
        self,
        items: Iterator[tuple[int, JobSpec | Mapping[str, Any]]],
        validator: BulkValidator,
        size: int,
    ) -> list[tuple[int, BulkJob]]:
        """Validate up to ``size`` specs. The cyclic garbage collector is paused meanwhile: the
        rows are acyclic, and its scans of a batch held in memory cost ~40% of validation."""
        enabled = gc.isenabled()
        gc.disable()
        try:
            return [(i, self._job(i, item, validator)) for i, item in islice(items, size)]
        finally:
            if enabled:
                gc.enable()

    def _job(
        self, index: int, item: JobSpec | Mapping[str, Any], validator: BulkValidator
    ) -> BulkJob:
        try:
            job = validator.job(item if isinstance(item, JobSpec) else spec_from_mapping(item))
            if job.shape.delivery is DeliveryMode.EXACTLY_ONCE and self.store.dialect == "sqlite":
                raise ValidationError("delivery", "exactly_once needs PostgreSQL")
        except ValidationError as exc:
            raise ValidationError(f"specs[{index}].{exc.field}", exc.reason) from None
        return job
