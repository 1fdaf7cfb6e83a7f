"""Waiting in tests: the one way to wait for a condition that real processes, loops or servers
bring about in their own time (import as ``from tests.waiting import eventually``; it works from
every test folder, ``tests`` being the package ``tests/conftest.py`` lives in).

Prefer, in this order: an event or test signal the code under test sets (``signalled``, or
``duetime._testsignals``), a frozen clock moved by the test (``duetime._clock.FrozenClock``),
and only then polling (``eventually``/``eventually_sync``) — for conditions that live in another
process or a database and have nothing to await.

Contract of the pollers: ``probe`` is called at once and then every ``every`` seconds until it
returns something truthy, which is returned; when ``timeout`` seconds passed without that, the
test fails with ``timed out after …s waiting for <what>`` (and the last value seen, then
``details()`` if given: a process's log, say). An exception raised by ``probe`` is not
swallowed: it fails the test at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

TIMEOUT = 20.0
"""How long a condition may take (a loaded CI machine, PostgreSQL, a worker's poll interval)."""


def _timed_out(
    what: str, timeout: float, last: object, details: Callable[[], str] | None
) -> AssertionError:
    message = f"timed out after {timeout}s waiting for {what} (last seen: {last!r})"
    return AssertionError(f"{message}\n{details()}" if details else message)


async def eventually(
    probe: Callable[[], Awaitable[T | None]],
    *,
    what: str,
    timeout: float = TIMEOUT,
    every: float = 0.05,
    details: Callable[[], str] | None = None,
) -> T:
    """Await ``probe()`` until it returns something truthy; return that (see the contract)."""
    deadline = time.monotonic() + timeout
    while True:
        value = await probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise _timed_out(what, timeout, value, details)
        await asyncio.sleep(every)


def eventually_sync(
    probe: Callable[[], T | None],
    *,
    what: str,
    timeout: float = TIMEOUT,
    every: float = 0.1,
    details: Callable[[], str] | None = None,
) -> T:
    """``eventually`` for plain functions (a synchronous HTTP client, a subprocess)."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise _timed_out(what, timeout, value, details)
        time.sleep(every)


async def signalled(event: asyncio.Event, *, what: str, timeout: float = TIMEOUT) -> None:
    """Wait until ``event`` is set; fail naming ``what`` after ``timeout`` seconds."""
    try:
        await asyncio.wait_for(event.wait(), timeout)
    except TimeoutError:
        raise AssertionError(f"timed out after {timeout}s waiting for {what}") from None
