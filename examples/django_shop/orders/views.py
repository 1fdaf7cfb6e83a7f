import json

from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

import duetime.contrib.django as duetime
from orders.models import Order


@csrf_exempt
@require_POST
def place_order(request: HttpRequest) -> JsonResponse:
    """The order and its shipping run commit together, or neither does."""
    with transaction.atomic():
        order = Order.objects.create(item=json.loads(request.body)["item"])
        run = duetime.trigger("ship-order", payload={"order": order.pk})
    return JsonResponse({"order": order.pk, "run": str(run.id)}, status=201)
