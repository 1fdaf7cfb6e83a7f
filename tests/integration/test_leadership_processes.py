"""Leadership among real scheduler processes: one leader; a clean stop hands over at once; a
killed leader is replaced after its term expires; `duetime nodes` shows who is who."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from duetime import AsyncApp
from duetime._types import Leadership
from tests.integration.cluster import Cluster
from tests.waiting import eventually

pytestmark = pytest.mark.slow


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "lead.db")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def cluster(db_url: str, tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(url=db_url, workdir=tmp_path, env={"DUETIME_LEADER_TTL": "2"})
    try:
        yield c
    finally:
        c.stop_all()


def pid_of(node_id: str) -> int:
    return int(node_id.split(":")[1])


async def test_leader_fails_over_on_stop_and_on_kill(db_url: str, cluster: Cluster) -> None:
    async with AsyncApp(db_url, migrate=True) as app:
        procs = {p.pid: p for p in (cluster.start("scheduler"), cluster.start("scheduler"))}

        async def leader(previous_term: int = 0) -> Leadership | None:
            lead = await app.store.leader_get()
            if (
                lead is None
                or lead.term <= previous_term
                or lead.expires_at < await app.store.db_now()
            ):
                return None
            return lead

        first = await eventually(leader, timeout=20, what="a leader")

        async def both_registered() -> bool:
            nodes, _ = await app.nodes()
            return sorted(pid_of(n.id) for n in nodes) == sorted(procs)

        await eventually(both_registered, timeout=20, what="both schedulers registered")

        # a clean stop resigns: the other scheduler takes over before the term would expire
        stopped = procs.pop(pid_of(first.node_id))
        stopped.send_signal(signal.SIGTERM)
        last_term_end = (await app.store.leader_get()).expires_at  # type: ignore[union-attr]
        stopped.wait(timeout=20)
        second = await eventually(lambda: leader(first.term), timeout=10, what="a new leader")
        assert pid_of(second.node_id) in procs
        assert second.elected_at < last_term_end

        # a killed leader is replaced once its term expires, by a scheduler started meanwhile
        replacement = cluster.start("scheduler")
        cluster.kill(procs.pop(pid_of(second.node_id)))
        third = await eventually(lambda: leader(second.term), timeout=15, what="a leader again")
        assert pid_of(third.node_id) == replacement.pid

        nodes_cli = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "duetime",
            "nodes",
            "--db",
            db_url,
            "--json",
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await nodes_cli.communicate()
        listed = json.loads(out)
        assert listed["leader"]["node_id"] == third.node_id
        assert third.node_id in {n["id"] for n in listed["nodes"]}
