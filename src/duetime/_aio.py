"""Small asyncio helpers shared by the service loops."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def wait_or_stop(stop: asyncio.Event, seconds: float) -> bool:
    """Sleep ``seconds`` unless ``stop`` is set first; True if it was."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
    return stop.is_set()


async def first_of(*awaitables: Awaitable[object]) -> None:
    """Wait until the first of several awaitables finishes; cancel the others."""
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


async def uncancellable(awaitable: Awaitable[T], *, reraise: bool = False) -> T:
    """Await ``awaitable`` to its end even if the caller is cancelled meanwhile: for work that
    must not stop halfway (writing an attempt's outcome, a group's commit). A cancel that
    arrives is absorbed; with ``reraise`` it is raised once ``awaitable`` has ended (its own
    exception, if it raised one, is raised instead)."""
    task = asyncio.ensure_future(awaitable)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.done():
                break
            cancelled = True
            current = None if reraise else asyncio.current_task()
            if current is not None:
                current.uncancel()
    result = task.result()
    if cancelled and reraise:
        raise asyncio.CancelledError
    return result
