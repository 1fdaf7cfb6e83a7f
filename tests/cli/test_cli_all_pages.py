"""``--all`` on the list commands (jobs list, runs list, dlq list): every page, through the
real executable, on both stores (issue 17)."""

from __future__ import annotations

import asyncio
import json

import pytest
from clikit import DeadRuns
from realcli import duetime, needs_executable

from duetime.app import AsyncApp

pytestmark = needs_executable

COUNT = 5
PAGE = "2"  # --limit: three pages for COUNT rows


@pytest.fixture
def url(store_url: str) -> str:
    """``store_url`` (SQLite, PostgreSQL), with duetime's schema."""

    async def migrate() -> None:
        async with AsyncApp(store_url, migrate=True):
            pass

    asyncio.run(migrate())
    return store_url


def make_jobs(url: str, *, triggers: int = 0) -> None:
    """COUNT jobs (``job-0`` …); ``job-0`` triggered ``triggers`` times."""

    async def go() -> None:
        async with AsyncApp(url) as app:
            for i in range(COUNT):
                job = await app.schedule(
                    f"job-{i}",
                    task="duetime.noop",
                    cron="0 3 * * *",
                    overlap="allow",
                    allow_unregistered=True,
                )
                if i == 0:
                    for _ in range(triggers):
                        await app.trigger(job.id)

    asyncio.run(go())


def table_rows(stdout: str) -> list[str]:
    """The rows of a plain table (its header line dropped)."""
    return stdout.splitlines()[1:]


def test_jobs_list_all_prints_every_page(url: str) -> None:
    make_jobs(url)
    first = duetime("jobs", "list", "--limit", PAGE, "--db", url)
    assert first.returncode == 0, first.stderr
    assert len(table_rows(first.stdout)) == 2
    assert "more: --cursor" in first.stderr

    every = duetime("jobs", "list", "--limit", PAGE, "--all", "--db", url)
    assert every.returncode == 0, every.stderr
    assert [r.split()[0] for r in table_rows(every.stdout)] == [f"job-{i}" for i in range(COUNT)]
    assert every.stderr == ""

    as_json = duetime("jobs", "list", "--limit", PAGE, "--all", "--json", "--db", url)
    page = json.loads(as_json.stdout)
    assert [j["name"] for j in page["items"]] == [f"job-{i}" for i in range(COUNT)]
    assert page["next_cursor"] is None


def test_runs_list_all_prints_every_page(url: str) -> None:
    make_jobs(url, triggers=COUNT)
    every = duetime(
        "runs", "list", "--job", "job-0", "--limit", PAGE, "--all", "--json", "--db", url
    )
    assert every.returncode == 0, every.stderr
    page = json.loads(every.stdout)
    assert len({r["id"] for r in page["items"]}) == COUNT
    assert page["next_cursor"] is None
    table = duetime("runs", "list", "--job", "job-0", "--limit", PAGE, "--all", "--db", url)
    assert len(table_rows(table.stdout)) == COUNT
    assert table.stderr == ""


def test_dlq_list_all_prints_every_page(url: str) -> None:
    dead = DeadRuns(url).make("doomed", COUNT)
    every = duetime("dlq", "list", "--limit", PAGE, "--all", "--json", "--db", url)
    assert every.returncode == 0, every.stderr
    page = json.loads(every.stdout)
    assert sorted(r["id"] for r in page["items"]) == sorted(str(i) for i in dead)
    table = duetime("dlq", "list", "--limit", PAGE, "--all", "--db", url)
    assert sorted(r.split()[0] for r in table_rows(table.stdout)) == sorted(str(i) for i in dead)


@pytest.mark.parametrize("command", [["jobs", "list"], ["runs", "list"], ["dlq", "list"]])
def test_all_with_a_cursor_is_refused_in_one_line(command: list[str], db: str) -> None:
    result = duetime(*command, "--all", "--cursor", "abc", "--db", db)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        "error: --all: cannot be combined with --cursor (--all lists every page from the first)\n"
    )
