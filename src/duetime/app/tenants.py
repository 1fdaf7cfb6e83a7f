"""``app.tenants``: a tenant's fairness limits, every tenant's queues (docs/fairness.md), and
the webhook signing secret (docs/webhooks.md)."""

from __future__ import annotations

from duetime._types import TenantLimits, TenantQueueStats
from duetime.app._service import Service
from duetime.errors import ValidationError
from duetime.store.base import TenantLimitsSetParams


class Tenants(Service):
    """Tenant-wide settings and views (``app.tenants``). ``tenant`` arguments default to the
    app's own tenant."""

    __slots__ = ()

    async def limits_set(
        self,
        tenant: str | None = None,
        *,
        max_in_flight: int | None = None,
        max_starts_per_second: float | None = None,
        weight: int | None = None,
    ) -> TenantLimits:
        """Set a tenant's limits, enforced by every claim of every worker: runs in flight at
        once, run starts per second (0 removes either limit), and its weight in each claim's
        share. Arguments left None are kept. Returns them all."""
        chosen = self._tenant_id(tenant)
        if max_in_flight is not None and (
            isinstance(max_in_flight, bool)
            or not isinstance(max_in_flight, int)
            or not 0 <= max_in_flight <= 1_000_000
        ):
            raise ValidationError(
                "max_in_flight", "must be a whole number from 0 (no limit) to 1000000"
            )
        if max_starts_per_second is not None and (
            isinstance(max_starts_per_second, bool)
            or not isinstance(max_starts_per_second, int | float)
            or not 0 <= max_starts_per_second <= 1_000_000
        ):
            raise ValidationError(
                "max_starts_per_second", "must be a number from 0 (no limit) to 1000000"
            )
        if weight is not None and (
            isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 1000
        ):
            raise ValidationError("weight", "must be a whole number from 1 to 1000")
        return await self.store.tenant_limits_set(
            TenantLimitsSetParams(
                tenant=chosen,
                max_in_flight=max_in_flight,
                max_starts_per_second=(
                    None if max_starts_per_second is None else float(max_starts_per_second)
                ),
                weight=weight,
            )
        )

    async def limits_get(self, tenant: str | None = None) -> TenantLimits:
        """A tenant's limits; no limits and weight 1 if never set."""
        return await self.store.tenant_limits_get(self._tenant_id(tenant))

    async def limits_list(self) -> list[TenantLimits]:
        """The limits of every tenant known to the store (by id)."""
        return await self.store.tenant_limits_list()

    async def stats(self) -> list[TenantQueueStats]:
        """Every tenant's queues: due depth, oldest due age, in flight, throttled (a snapshot
        of the whole cluster, by tenant then queue)."""
        return await self.store.tenant_stats()

    async def webhook_secret(self) -> str:
        """This tenant's webhook signing secret (created on first use): receivers of HTTP
        targets verify ``Duetime-Signature`` with it (docs/webhooks.md)."""
        return await self.store.tenant_secret(self.tenant)

    def _tenant_id(self, tenant: str | None) -> str:
        chosen = self.tenant if tenant is None else tenant
        if not isinstance(chosen, str) or not 1 <= len(chosen) <= 100 or not chosen.isprintable():
            raise ValidationError("tenant", "must be 1-100 printable characters")
        return chosen
