"""Apps for tests: an :class:`AsyncApp` whose store reads the test's frozen clock on either
database, and the check that an app given to the helpers does."""

from __future__ import annotations

from datetime import UTC, datetime

from duetime._clock import FrozenClock
from duetime._config import Settings
from duetime.app import App, AsyncApp
from duetime.app.async_app import run_events_of
from duetime.store import Pooling, create_store
from duetime.targets.python import TaskRegistry


class FrozenApp(AsyncApp):
    """An :class:`AsyncApp` on a :class:`FrozenClock` whose store reads that clock on SQLite and
    on PostgreSQL alike (a plain ``AsyncApp`` on PostgreSQL reads the database's clock), and
    whose schema is brought up to date when it opens. Everything else is ``AsyncApp``."""

    clock: FrozenClock

    def __init__(
        self,
        url: str,
        *,
        clock: FrozenClock,
        tenant: str = "default",
        settings: Settings | None = None,
        registry: TaskRegistry | None = None,
    ) -> None:
        super().__init__(
            url, tenant=tenant, settings=settings, clock=clock, registry=registry, migrate=True
        )

    async def open(self, *, create: bool = True) -> FrozenApp:
        """Open the store on the frozen clock and migrate it (a test database is the test's)."""
        if self._store is not None:
            return self
        run_events = run_events_of(self.settings)
        store = create_store(
            self.settings.database_url,
            clock=self.clock,
            create=create,
            pooling=Pooling.of(self.settings),
        )
        try:
            await store.open()
            await store.migrate(alive_within=self.settings.worker_stale_after)
        except BaseException:
            await store.close()
            raise
        store.run_events = run_events
        self._store = store
        return self


class FrozenSyncApp(App):
    """:class:`App` (blocking) over a :class:`FrozenApp`: the same clock rules, for sync tests."""

    def __init__(
        self,
        url: str,
        *,
        clock: FrozenClock,
        tenant: str = "default",
        settings: Settings | None = None,
        registry: TaskRegistry | None = None,
    ) -> None:
        self._setup(
            FrozenApp(url, clock=clock, tenant=tenant, settings=settings, registry=registry), None
        )


def start_of_minute(at: datetime | None = None) -> datetime:
    """``at`` (default: now), UTC, with seconds and microseconds cut: where a test's clock starts
    unless told otherwise (whole minutes keep cron instants round)."""
    return (at or datetime.now(UTC)).astimezone(UTC).replace(second=0, microsecond=0)


def frozen_clock_of(app: AsyncApp) -> FrozenClock:
    """``app``'s clock, which the helpers move and read; raises TypeError, saying what to do,
    unless it is a :class:`FrozenClock` its store reads too."""
    clock = app.clock
    if not isinstance(clock, FrozenClock):
        raise TypeError(
            "duetime.testing needs an app on a FrozenClock: make it with "
            "duetime.testing.FrozenApp(url, clock=FrozenClock(...)) or use the duetime_app fixture"
        )
    store_clock: object = getattr(app.store, "clock", None)
    if store_clock is not clock:
        raise TypeError(
            "this app's store does not read its FrozenClock (an AsyncApp on PostgreSQL reads the "
            "database's clock): make it with duetime.testing.FrozenApp(url, clock=...)"
        )
    return clock
