"""Store methods of issue 19's target features (``queries/targets.sql`` of each dialect),
written once for both stores; mixed into :class:`~duetime.store._sql.SQLStore`:

- a tenant's webhook signing secrets during a rotation's overlap window;
- the circuit breakers workers report (docs/decisions/0027).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from duetime._types import BreakerState, SecretRotation
from duetime.store._sql_surface import SQLSurface
from duetime.store._values import new_webhook_secret


class SQLTargets(SQLSurface):
    """Signing-secret rotation (audited) and reported breakers."""

    if TYPE_CHECKING:  # SQLAudit's and SQLStore's, beside this mixin in SQLStore

        def _fixed_now(self, now: datetime | None) -> datetime | None: ...
        async def _audit(self, conn: Any, now: datetime | None = None) -> None: ...

    def _records(self, rows: Sequence[dict[str, Any]]) -> str:
        raise NotImplementedError

    async def tenant_secret(self, tenant: str) -> str:
        raise NotImplementedError

    async def tenant_signing_secrets(self, tenant: str, now: datetime | None = None) -> list[str]:
        await self.tenant_secret(tenant)  # the tenant's row exists from here on
        row = await self._read_one(
            "tenant_signing_secrets_get", tenant=tenant, now=self._fixed_now(now)
        )
        secrets = [str(row["webhook_secret"])]
        if row["previous"] is not None:
            secrets.append(str(row["previous"]))
        return secrets

    async def tenant_secret_rotate(
        self, tenant: str, overlap: timedelta, now: datetime | None = None
    ) -> SecretRotation:
        await self.tenant_secret(tenant)
        secret = new_webhook_secret()
        async with self._write() as conn:
            row = await self._one(
                conn,
                "tenant_secret_rotate",
                tenant=tenant,
                secret=secret,
                overlap=overlap,
                now=self._fixed_now(now),
            )
            await self._audit(conn)
        until = self.codec.instant(row["previous_until"])
        assert until is not None
        return SecretRotation(tenant=tenant, secret=secret, previous_until=until)

    async def breakers_report(
        self, worker_id: str, breakers: Sequence[BreakerState], now: datetime | None = None
    ) -> None:
        rows = [
            {
                "key": b.key,
                "state": b.state,
                "failures": b.failures,
                "opened_at": b.opened_at,
                "retry_at": b.retry_at,
            }
            for b in breakers
        ]
        async with self._write() as conn:
            await self._exec(conn, "breakers_forget", worker_id=worker_id)
            if rows:
                await self._exec(
                    conn,
                    "breakers_insert",
                    worker_id=worker_id,
                    breakers=self._records(rows),
                    now=self._fixed_now(now),
                )
            await self._exec(conn, "breakers_prune")

    async def breakers_list(self) -> list[BreakerState]:
        rows = await self._read_all("breakers_list")
        return [
            BreakerState(
                worker_id=str(r["worker_id"]),
                key=str(r["key"]),
                state=str(r["state"]),
                failures=int(r["failures"]),
                opened_at=_instant(self.codec.instant(r["opened_at"])),
                retry_at=_instant(self.codec.instant(r["retry_at"])),
                updated_at=self.codec.instant(r["updated_at"]),
            )
            for r in rows
        ]


def _instant(value: datetime | None) -> datetime:
    assert value is not None  # NOT NULL columns
    return value
