"""``/api/v1/breakers``: the circuit breakers workers report open or half-open (issue 19;
docs/targets.md). Installation-wide (a breaker is a target host or a command, shared by every
tenant's jobs that use it): an ``admin`` key of any tenant may read them."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from duetime._types import BreakerState
from duetime.api.auth import Admin
from duetime.api.endpoint import Endpoint


class BreakerOut(BaseModel):
    worker_id: str = Field(description="The worker process whose breaker this is.")
    key: str = Field(description="`http:<host>:<port>` or `command:<name>`.")
    state: str = Field(description="`open` (runs wait until `retry_at`) or `half_open`.")
    failures: int = Field(description="Consecutive failures that opened it.")
    opened_at: datetime
    retry_at: datetime = Field(description="When an open breaker lets one probe run through.")
    updated_at: datetime | None

    @classmethod
    def of(cls, breaker: BreakerState) -> BreakerOut:
        return cls(
            worker_id=breaker.worker_id,
            key=breaker.key,
            state=breaker.state,
            failures=breaker.failures,
            opened_at=breaker.opened_at,
            retry_at=breaker.retry_at,
            updated_at=breaker.updated_at,
        )


class BreakersOut(BaseModel):
    breakers: list[BreakerOut]


class ListBreakers(Endpoint):
    """List circuit breakers
    Every breaker a live worker reports open or half-open (closed ones are not listed), oldest
    opened first. Its runs wait, without using attempts, until it half-opens."""

    method, path, tag = "GET", "/breakers", "observability"

    async def handle(self, caller: Admin) -> BreakersOut:
        return BreakersOut(breakers=[BreakerOut.of(b) for b in await caller.app.breakers()])


ENDPOINTS: tuple[type[Endpoint], ...] = (ListBreakers,)
