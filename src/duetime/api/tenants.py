"""``/api/v1/tenants/{tenant_id}/limits``: a tenant's fairness limits — runs in flight at once,
run starts per second, weight (docs/fairness.md); ``…/alert-webhooks``: where its alerts go.
A tenant's admin manages its own tenant's (another tenant's are 404); a superadmin any
tenant's."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import Path
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from duetime._types import TenantLimits
from duetime.api.auth import TENANT_PATTERN, Admin, require_own_tenant
from duetime.api.endpoint import Endpoint
from duetime.api.schemas import fields_from
from duetime.app.tenants import (
    DEFAULT_ROTATION_OVERLAP,
    MAX_ALERT_WEBHOOKS,
    MAX_ROTATION_OVERLAP,
    MIN_ROTATION_OVERLAP,
)

TAG = {
    "name": "tenants",
    "description": "Tenant fairness limits (the tenant's admin, or a superadmin).",
}

TenantId = Annotated[
    str, Path(min_length=1, max_length=100, pattern=TENANT_PATTERN, description="The tenant.")
]


class TenantLimitsIn(BaseModel):
    """The whole set of limits: a field left out or null means no limit (weight: 1)."""

    model_config = ConfigDict(extra="forbid")

    max_in_flight: int | None = Field(
        None,
        ge=1,
        le=1_000_000,
        strict=True,  # true is not 1 run, "5" not 5
        description="Runs running at once, across all workers.",
    )
    max_starts_per_second: float | None = Field(
        None,
        gt=0,
        le=1_000_000,
        allow_inf_nan=False,
        strict=True,
        description="Run starts per second across all workers (bursts of max(1, rate)).",
    )
    weight: int = Field(
        1, ge=1, le=1000, strict=True, description="Share of each claim among tenants."
    )
    max_jobs: int | None = Field(
        None,
        ge=1,
        le=1_000_000_000,
        strict=True,
        description="Jobs registered at once (cancelled ones do not count); null: no cap.",
    )
    max_backfill_runs: int | None = Field(
        None,
        ge=1,
        le=100_000_000,
        strict=True,
        description="Runs one backfill may create (`POST /jobs/{id}/backfill`); null: no cap.",
    )


class TenantLimitsOut(BaseModel):
    tenant: str
    max_in_flight: int | None
    max_starts_per_second: float | None
    weight: int
    max_jobs: int | None = None
    max_backfill_runs: int | None = None

    @classmethod
    def of(cls, limits: TenantLimits) -> TenantLimitsOut:
        return cls(**fields_from(cls, limits))


class GetTenantLimits(Endpoint):
    """Get a tenant's limits
    No limits and weight 1 for a tenant never configured."""

    method, path, tag = "GET", "/tenants/{tenant_id}/limits", "tenants"
    errors = (404, 422)

    async def handle(self, tenant_id: TenantId, caller: Admin) -> TenantLimitsOut:
        require_own_tenant(caller, tenant_id)
        return TenantLimitsOut.of(await caller.app.tenant_limits_get(tenant_id))


class SetTenantLimits(Endpoint):
    """Set a tenant's limits
    Replaces them all; every claim of every worker enforces them from its next claim on (runs
    already running are not stopped)."""

    method, path, tag = "PUT", "/tenants/{tenant_id}/limits", "tenants"
    errors = (404, 422)

    async def handle(
        self, tenant_id: TenantId, body: TenantLimitsIn, caller: Admin
    ) -> TenantLimitsOut:
        require_own_tenant(caller, tenant_id)
        limits = await caller.app.tenant_limits_set(
            tenant_id,
            max_in_flight=body.max_in_flight or 0,  # 0: no limit
            max_starts_per_second=body.max_starts_per_second or 0.0,
            weight=body.weight,
            max_jobs=body.max_jobs or 0,
            max_backfill_runs=body.max_backfill_runs or 0,
        )
        return TenantLimitsOut.of(limits)


class AlertWebhooksIn(BaseModel):
    """Where the tenant's alerts go, besides the installation's webhooks: the whole list."""

    model_config = ConfigDict(extra="forbid")

    webhooks: list[Annotated[str, StringConstraints(max_length=2048)]] = Field(
        max_length=MAX_ALERT_WEBHOOKS,
        description="http(s) URLs, checked as webhook targets' are; [] sends nowhere extra.",
    )


class AlertWebhooksOut(BaseModel):
    tenant: str
    webhooks: list[str]


class GetAlertWebhooks(Endpoint):
    """Get a tenant's alert webhooks
    Where its alerts (dead runs, missed SLAs, stuck runs, unserved tasks) go besides the
    installation's `DUETIME_ALERT_WEBHOOKS`."""

    method, path, tag = "GET", "/tenants/{tenant_id}/alert-webhooks", "tenants"
    errors = (404, 422)

    async def handle(self, tenant_id: TenantId, caller: Admin) -> AlertWebhooksOut:
        require_own_tenant(caller, tenant_id)
        urls = await caller.app.tenant_alert_webhooks(tenant_id)
        return AlertWebhooksOut(tenant=tenant_id, webhooks=urls)


class SetAlertWebhooks(Endpoint):
    """Set a tenant's alert webhooks
    Replaces the list. Each message is signed with the tenant's webhook secret
    (`Duetime-Signature`, as webhook targets are) and carries `Idempotency-Key:
    <incident>:<event>`; a URL's host must be one webhook targets may reach (checked again
    when connecting)."""

    method, path, tag = "PUT", "/tenants/{tenant_id}/alert-webhooks", "tenants"
    errors = (404, 422)

    async def handle(
        self, tenant_id: TenantId, body: AlertWebhooksIn, caller: Admin
    ) -> AlertWebhooksOut:
        require_own_tenant(caller, tenant_id)
        urls = await caller.app.tenant_alert_webhooks_set(body.webhooks, tenant=tenant_id)
        return AlertWebhooksOut(tenant=tenant_id, webhooks=urls)


class RotateSecretIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    overlap_seconds: float = Field(
        DEFAULT_ROTATION_OVERLAP,
        ge=MIN_ROTATION_OVERLAP,
        le=MAX_ROTATION_OVERLAP,
        allow_inf_nan=False,
        description="How long the previous secret is still signed with (both signatures).",
    )


class RotateSecretOut(BaseModel):
    tenant: str
    secret: str = Field(description="The new signing secret: give it to your receivers.")
    previous_until: datetime = Field(
        description="Until then every request also carries the previous secret's signature."
    )


class RotateWebhookSecret(Endpoint):
    """Rotate the webhook signing secret
    A new secret signs every request from now on; the previous one keeps signing too until
    `previous_until` (`Duetime-Signature: v1=<new>,v1=<old>`), so receivers can switch at
    their own pace (docs/webhooks.md). The answer is the only place the new secret is shown."""

    method, path, tag = "POST", "/tenants/{tenant_id}/webhook-secret/rotate", "tenants"
    errors = (404, 422)

    async def handle(
        self, tenant_id: TenantId, body: RotateSecretIn, caller: Admin
    ) -> RotateSecretOut:
        require_own_tenant(caller, tenant_id)
        rotation = await caller.app.rotate_webhook_secret(body.overlap_seconds, tenant=tenant_id)
        return RotateSecretOut(
            tenant=rotation.tenant,
            secret=rotation.secret,
            previous_until=rotation.previous_until,
        )


ENDPOINTS: tuple[type[Endpoint], ...] = (
    GetTenantLimits,
    SetTenantLimits,
    GetAlertWebhooks,
    SetAlertWebhooks,
    RotateWebhookSecret,
)
