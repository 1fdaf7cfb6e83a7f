"""The verified-key cache (docs/decisions/0013-api-key-cache.md), in process over ASGI on real
databases: a revoked key is refused by the very next request of the process that revoked it,
by another process as soon as the database's notification reaches it, and a cached key is never
served past :data:`~duetime.app.keys.KEY_CACHE_TTL` (frozen clock, no sleeps). SQLite reads the
key at every request."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import cast

import httpx
import psycopg
import pytest

from duetime._clock import FrozenClock
from duetime._types import ApiKey, ApiRole
from duetime.api import create_api
from duetime.app import AsyncApp
from duetime.app.keys import KEY_CACHE_TTL, VerifiedKeys
from duetime.store.postgres.key_news import CHANNEL, KeyNews
from duetime.store.postgres.store import PostgresStore

NEWS_TIMEOUT = 30.0
"""How long a test waits for a notification or a reconnection before failing (a hang guard,
not a measurement)."""
JOBS = "/api/v1/jobs"


def client(app: AsyncApp) -> httpx.AsyncClient:
    api = create_api(app, app.settings.with_(api_rate_limit=0), auth_required=True)
    transport = httpx.ASGITransport(app=api, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://localhost")


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def news_of(app: AsyncApp) -> KeyNews:
    return cast(PostgresStore, app.store).key_news


async def listening(app: AsyncApp, past: int | None = None) -> int:
    """The epoch once ``app``'s key listener is connected (and past ``past``)."""
    return await asyncio.wait_for(news_of(app).wait(past=past), NEWS_TIMEOUT)


def revoke_unannounced(url: str, key: ApiKey) -> None:
    """Revoke ``key`` by hand in SQL, without the notification duetime's statement sends."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE api_keys SET revoked_at = clock_timestamp() WHERE id = %s", (key.id,))


@pytest.fixture
async def pg_app(pg_url: str, clock: FrozenClock) -> AsyncIterator[AsyncApp]:
    async with AsyncApp(pg_url, migrate=True, clock=clock) as opened:
        yield opened


@pytest.mark.postgres
async def test_a_key_revoked_in_this_process_is_refused_by_the_next_request(
    pg_app: AsyncApp,
) -> None:
    admin, admin_secret = await pg_app.create_key("admin")
    key, secret = await pg_app.create_key("operator")
    await listening(pg_app)
    async with client(pg_app) as c:
        for _ in range(3):  # the first reads the key, the others are served from the cache
            assert (await c.get(JOBS, headers=bearer(secret))).status_code == 200
        revoked = await c.delete(f"/api/v1/keys/{key.id}", headers=bearer(admin_secret))
        assert revoked.status_code == 204
        assert (await c.get(JOBS, headers=bearer(secret))).status_code == 401
        assert (await c.get(JOBS, headers=bearer(admin_secret))).status_code == 200
        await pg_app.revoke_key(admin.id)  # the app's own call, not the endpoint's
        assert (await c.get(JOBS, headers=bearer(admin_secret))).status_code == 401


@pytest.mark.postgres
async def test_a_key_revoked_by_another_process_is_refused_once_its_news_arrives(
    pg_app: AsyncApp, pg_url: str
) -> None:
    key, secret = await pg_app.create_key("operator")
    async with AsyncApp(pg_url, migrate=False) as elsewhere, client(pg_app) as c:
        before = await listening(pg_app)
        for _ in range(2):
            assert (await c.post(f"{JOBS}/nope/trigger", headers=bearer(secret))).status_code == 404
        await elsewhere.revoke_key(key.id)
        await listening(pg_app, past=before)
        assert (await c.post(f"{JOBS}/nope/trigger", headers=bearer(secret))).status_code == 401


@pytest.mark.postgres
async def test_a_cached_key_is_read_again_once_its_time_is_up(
    pg_app: AsyncApp, pg_url: str, clock: FrozenClock
) -> None:
    key, secret = await pg_app.create_key("viewer")
    await listening(pg_app)
    async with client(pg_app) as c:
        assert (await c.get(JOBS, headers=bearer(secret))).status_code == 200
        revoke_unannounced(pg_url, key)
        # served without a read: the cache is what spares the round trip, and the TTL bounds
        # how long a change that was never announced goes unseen
        assert (await c.get(JOBS, headers=bearer(secret))).status_code == 200
        clock.advance(KEY_CACHE_TTL - timedelta(microseconds=1))
        assert (await c.get(JOBS, headers=bearer(secret))).status_code == 200
        clock.advance(timedelta(microseconds=1))
        assert (await c.get(JOBS, headers=bearer(secret))).status_code == 401


@pytest.mark.postgres
async def test_a_clock_that_went_back_distrusts_the_cache(
    pg_app: AsyncApp, pg_url: str, clock: FrozenClock
) -> None:
    key, secret = await pg_app.create_key("viewer")
    await listening(pg_app)
    async with client(pg_app) as c:
        assert (await c.get(JOBS, headers=bearer(secret))).status_code == 200
        revoke_unannounced(pg_url, key)
        clock.advance(timedelta(microseconds=-1))
        assert (await c.get(JOBS, headers=bearer(secret))).status_code == 401


@pytest.mark.postgres
async def test_changes_missed_while_the_listener_was_down_are_not_trusted(
    pg_app: AsyncApp, pg_url: str
) -> None:
    key, secret = await pg_app.create_key("viewer")
    before = await listening(pg_app)
    async with client(pg_app) as c:
        assert (await c.get(JOBS, headers=bearer(secret))).status_code == 200
        revoke_unannounced(pg_url, key)
        listener = news_of(pg_app).listener_pid
        with psycopg.connect(pg_url, autocommit=True) as conn:
            ended = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE pid = %s AND query = %s",
                (listener, f"LISTEN {CHANNEL}"),
            ).fetchall()
        assert ended == [(True,)]
        await listening(pg_app, past=before)  # reconnected: a new epoch
        assert (await c.get(JOBS, headers=bearer(secret))).status_code == 401


async def test_sqlite_reads_the_key_at_every_request(tmp_path: Path) -> None:
    path = tmp_path / "keys.db"
    async with AsyncApp(str(path)) as app, client(app) as c:
        key, secret = await app.create_key("viewer")
        assert (await c.get(JOBS, headers=bearer(secret))).status_code == 200
        with sqlite3.connect(path) as conn:  # another process's revocation, as it lands
            conn.execute("UPDATE api_keys SET revoked_at = 1 WHERE id = ?", (str(key.id),))
        assert (await c.get(JOBS, headers=bearer(secret))).status_code == 401


def test_an_entry_is_served_only_under_its_epoch_and_within_its_ttl(t0: datetime) -> None:
    """A key read while a change was announced (the epoch moved during the read) is never
    served; nor one read under the current epoch once KEY_CACHE_TTL has passed."""
    key = ApiKey(uuid.uuid4(), "t", ApiRole.VIEWER, name="", prefix="dt_x", created_at=t0)
    verified = VerifiedKeys()
    verified.put("h", key, epoch=7, now=t0)
    assert verified.get("h", epoch=7, now=t0) == key
    assert verified.get("h", epoch=8, now=t0) is None
    assert verified.get("h", epoch=7, now=t0) is None  # forgotten for good, not just hidden
    verified.put("h", key, epoch=8, now=t0)
    assert verified.get("h", epoch=8, now=t0 + KEY_CACHE_TTL) is None
