"""Knowing when a sync task's thread has really ended (decision 0016).

Cancelling the asyncio side of a sync task does not stop its thread: the call goes on. A run
replaced by a newer one must not overlap with it, so its worker waits for the thread before it
records the attempt. :class:`TaskThread` submits the call to the worker's pool itself and keeps
the pool's future, which already knows whether the call began and when it returned: tracking
costs nothing per call (it is what ``run_in_executor`` does), whatever the job's overlap policy.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any


class TaskThread:
    """One attempt's sync call, submitted to ``executor`` in a copy of the caller's context
    (its log lines are about the run, as an async task's). Await :attr:`result` for its
    outcome; after a cancel, :meth:`abandon` says whether the function is running or has run
    (then await :meth:`exited`) or will never run."""

    __slots__ = ("_future", "result")

    def __init__(self, executor: Executor, func: Callable[..., Any], *args: Any) -> None:
        context = contextvars.copy_context()
        self._future: Future[Any] = executor.submit(context.run, func, *args)
        self.result: asyncio.Future[Any] = asyncio.wrap_future(self._future)
        """The call's outcome; cancelling it cancels a call that has not begun."""

    def abandon(self) -> bool:
        """The attempt was cancelled: True if the function is running or has run (await
        :meth:`exited`), False if it had not begun (it never will)."""
        return not self._future.cancel()

    async def exited(self) -> None:
        """Return once the function has returned (or raised). Cancelling this wait leaves the
        thread running."""
        if self._future.done():
            return
        loop = asyncio.get_running_loop()
        returned = asyncio.Event()
        self._future.add_done_callback(lambda _: loop.call_soon_threadsafe(returned.set))
        await returned.wait()
