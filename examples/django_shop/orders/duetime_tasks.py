"""The shop's tasks (imported at start-up by duetime's app config)."""

from typing import Any

from duetime.contrib.django import task
from orders.models import Order


@task("orders.ship")
def ship(ctx: Any, payload: dict[str, int]) -> None:
    Order.objects.filter(pk=payload["order"]).update(shipped=True)
