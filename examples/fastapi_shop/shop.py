"""A small shop on FastAPI with duetime inside it: placing an order inserts it and triggers its
shipping in one transaction (the run exists exactly when the order does); the embedded worker
ships it. Run it with ``SHOP_DATABASE_URL=postgresql://… uvicorn shop:api``."""

from __future__ import annotations

import os
from typing import Any

import psycopg
from fastapi import FastAPI, HTTPException
from pydantic import BaseModel

from duetime import AsyncApp
from duetime.contrib.fastapi import DuetimeApp, duetime_lifespan

DATABASE_URL = os.environ["SHOP_DATABASE_URL"]

jobs = AsyncApp(DATABASE_URL, migrate=True)


@jobs.task("shop.ship")
async def ship(ctx: Any, payload: dict[str, int]) -> None:
    async with await psycopg.AsyncConnection.connect(DATABASE_URL) as conn:
        await conn.execute("UPDATE orders SET shipped = true WHERE id = %s", (payload["order"],))


async def declare(app: AsyncApp) -> None:
    """At start-up: the shop's table, and the shipping job — only ever triggered, so it is
    paused (its schedule never fires; triggers still run)."""
    async with await psycopg.AsyncConnection.connect(DATABASE_URL) as conn:
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS orders (id serial PRIMARY KEY, item text NOT NULL, "
            "shipped boolean NOT NULL DEFAULT false)"
        )
    await app.schedule("ship-order", task="shop.ship", cron="0 0 1 1 *")
    await app.pause("ship-order")


api = FastAPI(lifespan=duetime_lifespan(jobs, roles=("worker", "scheduler"), setup=declare))


class OrderIn(BaseModel):
    item: str


@api.post("/orders", status_code=201)
async def place_order(order: OrderIn, duetime: DuetimeApp) -> dict[str, Any]:
    async with await psycopg.AsyncConnection.connect(DATABASE_URL) as conn:  # commits at exit
        cursor = await conn.execute(
            "INSERT INTO orders (item) VALUES (%s) RETURNING id", (order.item,)
        )
        (order_id,) = await cursor.fetchone()  # RETURNING: one row
        run = await duetime.trigger("ship-order", payload={"order": order_id}, connection=conn)
    return {"order": order_id, "run": str(run.id)}


@api.get("/orders/{order_id}")
async def get_order(order_id: int) -> dict[str, Any]:
    async with await psycopg.AsyncConnection.connect(DATABASE_URL) as conn:
        cursor = await conn.execute("SELECT item, shipped FROM orders WHERE id = %s", (order_id,))
        row = await cursor.fetchone()
    if row is None:
        raise HTTPException(404, f"order {order_id} not found")
    return {"order": order_id, "item": row[0], "shipped": row[1]}
