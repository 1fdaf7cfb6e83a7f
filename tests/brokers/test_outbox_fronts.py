"""Dead broker messages through the REST API (in process, httpx over ASGI) and the CLI, on
both stores for the API: listed with the broker's refusal, paged, replayed (by id or all),
every replay audited; bad input is a 422 problem or exit 2."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import pytest
from typer.testing import CliRunner

from duetime._clock import FrozenClock
from duetime._types import ApiRole
from duetime.api import create_api
from duetime.cli import cli
from duetime.testing import FrozenApp
from tests.brokers.brokerkit import dead_messages


@pytest.fixture
async def client(store_url: str, clock: FrozenClock) -> AsyncIterator[httpx.AsyncClient]:
    async with FrozenApp(store_url, clock=clock) as app:
        await dead_messages(app, 3)
        _, secret = await app.create_key(ApiRole.ADMIN)
        transport = httpx.ASGITransport(app=create_api(app, auth_required=True))  # type: ignore[arg-type]
        async with httpx.AsyncClient(
            transport=transport,
            base_url="http://localhost/api/v1",
            headers={"Authorization": f"Bearer {secret}"},
        ) as made:
            yield made


async def test_list_page_and_replay_over_rest(client: httpx.AsyncClient) -> None:
    first = (await client.get("/outbox/dead", params={"limit": 2})).json()
    assert [m["attempt"] for m in first["messages"]] == [1, 1]
    assert first["messages"][0]["last_error"] == "NOT_FOUND - no exchange 'gone'"
    assert first["messages"][0]["message_id"].endswith(":1")
    assert first["messages"][0]["target"]["exchange"] == "gone"
    rest = (await client.get("/outbox/dead", params={"after": first["next_after"]})).json()
    assert len(rest["messages"]) == 1
    assert rest["next_after"] is None
    depth = (await client.get("/outbox")).json()
    assert (depth["pending"], depth["dead"]) == (0, 3)

    one = first["messages"][0]["id"]
    answer = await client.post("/outbox/dead/replay", json={"ids": [one]})
    assert answer.json() == {"replayed": 1}
    assert (await client.post("/outbox/dead/replay", json={})).json() == {"replayed": 2}
    assert (await client.get("/outbox")).json()["pending"] == 3
    audit = (await client.get("/audit", params={"action": "replayed"})).json()["items"]
    assert [a["subject_kind"] for a in audit] == ["outbox", "outbox"]


async def test_bad_input_is_a_422_problem(client: httpx.AsyncClient) -> None:
    for response in (
        await client.get("/outbox/dead", params={"limit": 0}),
        await client.get("/outbox/dead", params={"after": "x"}),
        await client.post("/outbox/dead/replay", json={"ids": []}),
        await client.post("/outbox/dead/replay", json={"ids": ["a"]}),
        await client.post("/outbox/dead/replay", json={"every": True}),
    ):
        assert response.status_code == 422, response.text
        assert response.headers["content-type"] == "application/problem+json"


def test_cli_lists_and_replays(tmp_path, clock: FrozenClock) -> None:  # type: ignore[no-untyped-def]
    import asyncio

    db = str(tmp_path / "duetime.db")

    async def make() -> list[int]:
        async with FrozenApp(db, clock=clock) as app:
            return await dead_messages(app, 2)

    ids = asyncio.run(make())
    runner = CliRunner()
    listed = runner.invoke(cli, ["outbox", "dead", "--db", db, "--json"])
    assert listed.exit_code == 0, listed.output
    assert [m["id"] for m in json.loads(listed.stdout)] == ids
    table = runner.invoke(cli, ["outbox", "dead", "--db", db])
    assert "NOT_FOUND - no exchange 'gone'" in table.stdout
    both = runner.invoke(cli, ["outbox", "replay", "--db", db])
    assert both.exit_code == 2
    assert "give outbox ids or --all" in both.stderr
    replayed = runner.invoke(cli, ["outbox", "replay", str(ids[0]), "--db", db])
    assert replayed.stdout.strip() == "replayed 1 message(s)"
    status = runner.invoke(cli, ["outbox", "status", "--db", db, "--json"])
    assert json.loads(status.stdout)["pending"] == 1
    assert json.loads(status.stdout)["dead"] == 1
    rest = runner.invoke(cli, ["outbox", "replay", "--all", "--db", db])
    assert rest.stdout.strip() == "replayed 1 message(s)"


async def test_a_remote_worker_cannot_serve_a_broker_connection(
    client: httpx.AsyncClient,
) -> None:
    answer = await client.post(
        "/worker/claim",
        json={"worker_id": "r1", "tasks": ["billing.settle", "duetime.broker:b"], "max_runs": 5},
    )
    assert answer.status_code == 422, answer.text
    assert "broker connection" in answer.text
