"""What a task receives about the run it executes."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class RunContext:
    """Handed to every task call.

    ``run_id`` is the idempotency key: the same for every attempt of one run, so a handler
    that dedupes on it applies its effect once even though delivery is at-least-once.
    ``token`` is the fencing token of this attempt; pass it to systems that can fence writes.
    """

    run_id: uuid.UUID
    job_id: uuid.UUID
    job_name: str
    tenant: str
    task: str
    scheduled_for: datetime
    attempt: int
    max_attempts: int
    token: int
    worker_id: str
    payload: Any

    @property
    def idempotency_key(self) -> str:
        return str(self.run_id)
