"""The coalescing writer behind ctx.progress/ctx.checkpoint: a refused write (stale attempt)
never leaves a waiter hanging, even when newer values were submitted meanwhile."""

from __future__ import annotations

import asyncio

from duetime.worker.run_session import _LatestWriter


async def test_waiters_learn_of_a_refusal_for_values_submitted_during_the_write() -> None:
    writing = asyncio.Event()
    release = asyncio.Event()
    refusals: list[bool] = []

    async def write(value: int) -> bool:
        writing.set()
        await release.wait()
        return False  # the attempt's token was taken over

    writer: _LatestWriter[int] = _LatestWriter(
        "checkpoint",
        write,
        transient=(),
        give_up_after=1.0,
        on_refused=lambda: refusals.append(True),
    )
    writer.submit(1)
    await writing.wait()
    second = writer.submit(2)  # arrives while 1 is being written
    release.set()
    assert await asyncio.wait_for(writer.wait(second), 5) is False
    assert await asyncio.wait_for(writer.wait(), 5) is False
    writer.submit(3)
    assert await asyncio.wait_for(writer.wait(), 5) is False
    assert refusals == [True]
