"""``app.tenants``: a tenant's fairness limits, every tenant's queues (docs/fairness.md), and
the webhook signing secret (docs/webhooks.md)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from duetime._audit import url_origin
from duetime._types import SecretRotation, TenantLimits, TenantQueueStats
from duetime.app._service import Service
from duetime.app.audit import audited
from duetime.errors import ValidationError
from duetime.store.base import TenantLimitsSetParams
from duetime.targets.http import validate_target

MAX_ALERT_WEBHOOKS = 10
"""Alert webhook URLs a tenant may set."""
DEFAULT_ROTATION_OVERLAP = 86_400.0
"""Seconds both signing secrets are sent after a rotation, by default (a day)."""
MIN_ROTATION_OVERLAP = 60.0
"""Shortest overlap: workers cache a tenant's secrets for up to 10 s (targets/http.py)."""
MAX_ROTATION_OVERLAP = 30 * 86_400.0


def validate_alert_webhooks(webhooks: object) -> list[str]:
    """The URLs, each checked as a webhook target's URL, duplicates dropped (first kept);
    ValidationError naming ``webhooks[i]`` otherwise."""
    if isinstance(webhooks, str) or not isinstance(webhooks, Sequence):
        raise ValidationError("webhooks", "must be a list of http:// or https:// URLs")
    if len(webhooks) > MAX_ALERT_WEBHOOKS:
        raise ValidationError("webhooks", f"at most {MAX_ALERT_WEBHOOKS} URLs")
    urls: list[str] = []
    for i, url in enumerate(webhooks):
        try:
            checked = validate_target({"type": "http", "url": url})["url"]
        except ValidationError as exc:
            raise ValidationError(f"webhooks[{i}]", exc.reason) from None
        if checked not in urls:
            urls.append(checked)
    return urls


def _check_range(
    field: str, value: object, low: int, high: int, *, zero: str = "", whole: bool = True
) -> None:
    """Nothing when ``value`` is None or a number (a whole one if ``whole``; never a bool) from
    ``low`` to ``high``; else ValidationError ``must be a whole number from 0 (<zero>) to
    <high>``, ``zero`` saying what 0 means."""
    kinds = int if whole else int | float
    if value is None or (
        not isinstance(value, bool) and isinstance(value, kinds) and low <= value <= high
    ):
        return
    what = "a whole number" if whole else "a number"
    start = f"{low} ({zero})" if zero else str(low)
    raise ValidationError(field, f"must be {what} from {start} to {high}")


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
        max_backfill_runs: int | None = None,
        max_jobs: int | None = None,
    ) -> TenantLimits:
        """Set a tenant's limits, enforced by every claim of every worker: runs in flight at
        once, run starts per second (0 removes either limit), and its weight in each claim's
        share. Arguments left None are kept. Returns them all."""
        chosen = self._tenant_id(tenant)
        _check_range("max_in_flight", max_in_flight, 0, 1_000_000, zero="no limit")
        _check_range(
            "max_starts_per_second",
            max_starts_per_second,
            0,
            1_000_000,
            zero="no limit",
            whole=False,
        )
        _check_range("weight", weight, 1, 1000)
        _check_range("max_backfill_runs", max_backfill_runs, 0, 100_000_000, zero="no cap")
        # registered jobs; 0 removes the cap (decision 0023)
        _check_range("max_jobs", max_jobs, 0, 1_000_000_000, zero="no cap")
        given = {
            "max_jobs": max_jobs,
            "max_backfill_runs": max_backfill_runs,
            "max_in_flight": max_in_flight,
            "max_starts_per_second": max_starts_per_second,
            "weight": weight,
        }
        after = {k: v for k, v in given.items() if v is not None}
        # read before the write, not in its transaction: an admin's call, not a hot path
        old = await self.store.tenant_limits_get(chosen)
        change = {"before": {k: getattr(old, k) for k in after}, "after": after}
        with audited(self, "limits_set", "tenant", subject_id=chosen, tenant=chosen, change=change):
            return await self.store.tenant_limits_set(
                TenantLimitsSetParams(
                    tenant=chosen,
                    max_in_flight=max_in_flight,
                    max_starts_per_second=(
                        None if max_starts_per_second is None else float(max_starts_per_second)
                    ),
                    weight=weight,
                    max_jobs=max_jobs,
                    max_backfill_runs=max_backfill_runs,
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

    async def alert_webhooks_set(
        self, webhooks: Sequence[str], *, tenant: str | None = None
    ) -> list[str]:
        """Send a tenant's alerts (its dead runs, missed SLAs, stuck runs, unserved tasks) to
        these webhook URLs too, besides the installation's ``alert_webhooks``; ``[]`` for none.
        Replaces the list; returns it. Each URL is checked as a webhook target's is (public
        hosts, or those ``http_allow_hosts`` lists, at send time too), at most
        :data:`MAX_ALERT_WEBHOOKS`; messages are signed with the tenant's webhook secret."""
        chosen = self._tenant_id(tenant)
        urls = validate_alert_webhooks(webhooks)
        old = (await self.store.tenant_alert_webhooks([chosen])).get(chosen, [])
        change = {
            "before": {"webhooks": [url_origin(u) for u in old]},
            "after": {"webhooks": [url_origin(u) for u in urls]},
        }
        with audited(
            self, "alert_webhooks_set", "tenant", subject_id=chosen, tenant=chosen, change=change
        ):
            return await self.store.tenant_alert_webhooks_set(chosen, urls)

    async def alert_webhooks(self, tenant: str | None = None) -> list[str]:
        """Where a tenant's alerts go besides the installation's webhooks ([] if nowhere)."""
        chosen = self._tenant_id(tenant)
        return (await self.store.tenant_alert_webhooks([chosen])).get(chosen, [])

    async def webhook_secret(self) -> str:
        """This tenant's webhook signing secret (created on first use): receivers of HTTP
        targets verify ``Duetime-Signature`` with it (docs/webhooks.md)."""
        return await self.store.tenant_secret(self.tenant)

    async def rotate_webhook_secret(
        self, overlap: float = DEFAULT_ROTATION_OVERLAP, *, tenant: str | None = None
    ) -> SecretRotation:
        """Give the tenant a new webhook signing secret; the current one stays valid for
        ``overlap`` seconds (at least :data:`MIN_ROTATION_OVERLAP`), during which every
        request carries both signatures (``Duetime-Signature: v1=<new>,v1=<old>``), so
        receivers switch to the new secret at their own pace (docs/webhooks.md). Returns the
        new secret and when the old one stops being sent. Audited (without the secret)."""
        chosen = self._tenant_id(tenant)
        if (
            isinstance(overlap, bool)
            or not isinstance(overlap, int | float)
            or not MIN_ROTATION_OVERLAP <= overlap <= MAX_ROTATION_OVERLAP
        ):
            raise ValidationError(
                "overlap",
                f"must be seconds from {MIN_ROTATION_OVERLAP:g} to {MAX_ROTATION_OVERLAP:g} "
                "(longer than a worker caches the secret)",
            )
        change = {"after": {"overlap_seconds": float(overlap)}}
        with audited(
            self,
            "webhook_secret_rotated",
            "tenant",
            subject_id=chosen,
            tenant=chosen,
            change=change,
        ):
            return await self.store.tenant_secret_rotate(chosen, timedelta(seconds=overlap))

    def _tenant_id(self, tenant: str | None) -> str:
        chosen = self.tenant if tenant is None else tenant
        if not isinstance(chosen, str) or not 1 <= len(chosen) <= 100 or not chosen.isprintable():
            raise ValidationError("tenant", "must be 1-100 printable characters")
        return chosen
