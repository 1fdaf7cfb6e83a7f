"""``manage.py place_order ITEM [--on-commit] [--rollback]``: an order and its shipping run,
in one atomic block — transactional on Django's connection, or with ``--on-commit`` triggered
after the commit; ``--rollback`` rolls the block back."""

from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

import duetime.contrib.django as duetime
from orders.models import Order


class Command(BaseCommand):
    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("item")
        parser.add_argument("--on-commit", action="store_true")
        parser.add_argument("--rollback", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        with transaction.atomic():
            order = Order.objects.create(item=options["item"])
            if options["on_commit"]:
                duetime.trigger_on_commit("ship-order", payload={"order": order.pk})
            else:
                duetime.trigger("ship-order", payload={"order": order.pk})
            if options["rollback"]:
                transaction.set_rollback(True)
        self.stdout.write(str(order.pk))
