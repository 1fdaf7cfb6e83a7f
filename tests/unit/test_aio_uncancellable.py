"""``duetime._aio.uncancellable``: the awaited work runs to its end when its caller is
cancelled; the cancel is absorbed, or with ``reraise`` raised once the work has ended."""

from __future__ import annotations

import asyncio

import pytest

from duetime._aio import uncancellable


async def _cancelled_meanwhile(*, reraise: bool) -> tuple[asyncio.Task[str], list[str]]:
    """A caller awaiting work through ``uncancellable``, cancelled while the work waits; the
    caller's task (done) and what the work did."""
    began, go_on = asyncio.Event(), asyncio.Event()
    done: list[str] = []

    async def work() -> str:
        began.set()
        await go_on.wait()
        done.append("ended")
        return "result"

    async def caller() -> str:
        return await uncancellable(work(), reraise=reraise)

    task = asyncio.create_task(caller())
    await began.wait()
    task.cancel()
    await asyncio.sleep(0)  # the cancel reaches the caller while the work still waits
    assert done == []
    go_on.set()
    await asyncio.wait([task])
    return task, done


async def test_a_cancel_is_absorbed_and_the_work_ends() -> None:
    task, done = await _cancelled_meanwhile(reraise=False)

    assert done == ["ended"]
    assert task.result() == "result"
    assert task.cancelling() == 0


async def test_with_reraise_the_cancel_is_raised_once_the_work_has_ended() -> None:
    task, done = await _cancelled_meanwhile(reraise=True)

    assert done == ["ended"]
    assert task.cancelled()
    with pytest.raises(asyncio.CancelledError):
        task.result()
