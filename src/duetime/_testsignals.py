"""Test signals: named points in a component that a test can react to or wait for, instead of
overriding the component's private methods (after River's ``testsignal``).

A component owns a small dataclass of :class:`Signal` fields (``worker.signals.spawned``) and
calls ``emit`` at the point of interest. A signal nobody listens to is inert: ``emit`` is one
check and returns. A test makes it listen in one of two ways:

- ``signal.on(callback)``: the callback runs synchronously inside ``emit``, at that very point
  of the component (to act there: set a stop event at the 50th spawn, say);
- ``signal.init()`` then ``await signal.wait()``: every value emitted after ``init`` is kept,
  in order, and ``wait`` returns the next one (or fails the test after ``timeout``).

Production code never listens: signals are for tests only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Signal(Generic[T]):
    __slots__ = ("_callbacks", "_queue", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._callbacks: list[Callable[[T], None]] = []
        self._queue: asyncio.Queue[T] | None = None

    def emit(self, value: T) -> None:
        """Called by the component: hand ``value`` to the listeners, if any."""
        if not self._callbacks and self._queue is None:
            return
        for callback in list(self._callbacks):
            callback(value)
        if self._queue is not None:
            self._queue.put_nowait(value)

    def on(self, callback: Callable[[T], None]) -> None:
        """Run ``callback(value)`` inside every later ``emit`` (it must not block)."""
        self._callbacks.append(callback)

    def init(self) -> Signal[T]:
        """Keep every value emitted from now on, for :meth:`wait`."""
        if self._queue is None:
            self._queue = asyncio.Queue()
        return self

    async def wait(self, *, timeout: float = 15.0) -> T:
        """The next value kept since :meth:`init`; fails naming the signal after ``timeout``."""
        if self._queue is None:
            raise RuntimeError(f"test signal {self.name!r}: call init() before wait()")
        try:
            return await asyncio.wait_for(self._queue.get(), timeout)
        except TimeoutError:
            raise AssertionError(
                f"timed out after {timeout}s waiting for test signal {self.name!r}"
            ) from None
