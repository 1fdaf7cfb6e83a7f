"""The REST API while its database cannot be reached (a failover, a restart): a real
``duetime server`` reaches PostgreSQL through a TCP forwarder the test closes — every
connection cut, new ones refused — and opens again on the same port. Requests meanwhile get a
503 problem with ``Retry-After`` (not a 500 and a traceback); once the database answers again
the same server serves them, without a restart. The failover test does the same across a
real Patroni failover (tests/failover/).

PostgreSQL only, on a database of the test's own."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
import pytest

from duetime.app import AsyncApp
from tests.api.apikit import problem, start
from tests.forwarder import Forwarder
from tests.waiting import eventually_sync

pytestmark = pytest.mark.postgres


def _runs(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM runs").fetchone()
    return int(row[0]) if row else 0


def test_an_unreachable_database_is_503_and_the_server_serves_again_after(
    own_database: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    parts = urlsplit(own_database)
    forwarder = Forwarder((parts.hostname or "127.0.0.1", parts.port or 5432))
    forwarder.open()
    through = urlunsplit(parts._replace(netloc=f"postgres@127.0.0.1:{forwarder.port}"))

    async def setup() -> str:
        async with AsyncApp(through, migrate=True) as app:
            await app.schedule("outage", task="t.outage", cron="0 3 * * *", allow_unregistered=True)
            return (await app.create_key("operator", name="outage"))[1]

    key = asyncio.run(setup())
    # a short wait for a pooled connection: the outage's answer comes in seconds, not 30
    server = start(
        through,
        cwd=tmp_path_factory.mktemp("outage"),
        env={"DUETIME_DATABASE_CHECKOUT_WAIT": "2"},
    )
    try:
        with server.client(key) as client:
            assert client.post("/jobs/outage/trigger").status_code == 201, server.text()
            forwarder.cut()
            for response in (
                client.post("/jobs/outage/trigger"),  # a write
                client.get("/jobs/outage"),  # a read
                client.post("/jobs/outage/trigger", json={}, headers={"Idempotency-Key": "k1"}),
            ):
                body = problem(response, 503)
                assert body["type"] == "urn:duetime:problem:unavailable", body
                assert "cannot be reached" in body["detail"], body
                assert response.headers["retry-after"] == "5"
            forwarder.open()

            def served() -> httpx.Response | None:
                response = client.post("/jobs/outage/trigger")
                if response.status_code == 503:
                    return None
                return response

            after = eventually_sync(served, what="a trigger served after the outage", every=0.5)
            assert after.status_code == 201, after.text
        assert _runs(own_database) == 2, "the 503s made nothing"
    finally:
        server.stop()
        forwarder.cut()
    output = server.text()
    assert "503, the database cannot be reached" in output
    assert "Traceback" not in output.split("duetime server: listening", 1)[-1], output
