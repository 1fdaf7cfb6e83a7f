"""The outbox alerts (docs/brokers.md): ``outbox_backlog`` while the oldest unpublished broker
message is older than ``alert_outbox_after`` (a broker down, or no relay serving its
connection), one incident per connection; ``outbox_dead`` while dead messages wait to be
replayed. Their facts are the store's ``outbox_depth``; :func:`outbox_conditions` is pure."""

from __future__ import annotations

from datetime import datetime

from duetime._monitoring import AlertCondition, AlertKind
from duetime._outbox import OutboxDepth

__all__ = ["RESOLUTIONS", "outbox_conditions"]

RESOLUTIONS = {
    AlertKind.OUTBOX_BACKLOG: "the outbox's messages are being published in time again",
    AlertKind.OUTBOX_DEAD: "no dead broker messages left (replayed)",
}


def outbox_conditions(depth: OutboxDepth, now: datetime, after: float) -> list[AlertCondition]:
    out: list[AlertCondition] = []
    if depth.oldest is not None:
        age = (now - depth.oldest).total_seconds()
        if age >= after:
            out.append(
                AlertCondition(
                    AlertKind.OUTBOX_BACKLOG,
                    "outbox",
                    f"{depth.pending} broker message(s) unpublished, the oldest for {age:.0f}s "
                    f"(by connection: {depth.by_connection})",
                    details={
                        "pending": depth.pending,
                        "oldest_age_seconds": round(age, 3),
                        "by_connection": dict(depth.by_connection),
                    },
                )
            )
    if depth.dead:
        out.append(
            AlertCondition(
                AlertKind.OUTBOX_DEAD,
                "outbox",
                f"{depth.dead} broker message(s) refused by their broker for good: "
                "see `duetime outbox dead`, then replay them",
                details={"dead": depth.dead},
            )
        )
    return out
