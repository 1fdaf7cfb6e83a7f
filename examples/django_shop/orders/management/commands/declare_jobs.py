"""``manage.py declare_jobs``: the shop's duetime jobs (run at each deploy: unchanged jobs stay
as they are). Shipping is only ever triggered: its job is paused (triggers still run)."""

from typing import Any

from django.core.management.base import BaseCommand

import duetime.contrib.django as duetime


class Command(BaseCommand):
    def handle(self, *args: Any, **options: Any) -> None:
        app = duetime.get_app()
        app.schedule("ship-order", task="orders.ship", cron="0 0 1 1 *")
        app.pause("ship-order")
