"""Command targets (issue 19 item 5): an allow-listed argv template, filled from the payload
one argument per placeholder, run with no shell; its whole process group ended on timeout and
on cancel; a command name no worker serves refused at registration.

Processes are real (``python -c``); the process-tree tests record the pids of a child and the
grandchild it spawns in a file, then check in /proc that both are gone (a zombie counts as
gone: it holds no resources and runs nothing)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from duetime import AsyncApp, Retry, Settings, ValidationError
from duetime._types import AttemptOutcome, RunState
from duetime.errors import UnknownTask
from duetime.targets.command import (
    CommandExecutor,
    CommandFailed,
    CommandRejected,
    CommandTimeout,
    load_commands,
)
from duetime.targets.context import RunContext
from tests.targets.receiver import Receiver
from tests.targets.test_http_target import FAST, YEARLY, Harness
from tests.waiting import eventually

PRINT_ARGV = "import json, sys; print(json.dumps(sys.argv[1:]))"
HOSTILE = [
    "two words",
    'it\'s "quoted"',
    "a; rm -rf /tmp/x",
    "$(touch /tmp/duetime-pwned)",
    "`id`",
    "| cat && echo $HOME > x",
    "*",
    "",
    "line\nbreak",
]

SLOW = "import time; print('working on it', flush=True); time.sleep(600)"

# A child that spawns a grandchild (ignoring SIGTERM when told to), writes both pids to the
# file argv[1], then waits forever.
TREE = """
import os, subprocess, sys, time
stubborn = sys.argv[2] == "stubborn"
code = ("import signal, time\\n"
        + ("signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n" if stubborn else "")
        + "time.sleep(600)")
grandchild = subprocess.Popen([sys.executable, "-c", code])
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write("%d %d" % (os.getpid(), grandchild.pid))
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(600)
"""


def ctx(payload: Any, attempt: int = 1) -> RunContext:
    return RunContext(
        run_id=uuid.uuid4(),
        job_id=uuid.uuid4(),
        job_name="j",
        tenant="default",
        task="duetime.command:x",
        scheduled_for=datetime(2026, 1, 1, tzinfo=UTC),
        attempt=attempt,
        max_attempts=3,
        token=7,
        worker_id="w",
        payload=payload,
    )


def executor(**commands: dict[str, Any]) -> CommandExecutor:
    return CommandExecutor(load_commands(json.dumps(commands)))


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (not gone, not a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def read_pids(path: Path) -> list[int] | None:
    """The pids the tree wrote to ``path`` (written atomically), or None before it has."""
    try:
        return [int(p) for p in path.read_text().split()]
    except FileNotFoundError:
        return None


async def pids_in(path: Path, task: asyncio.Task[Any] | None = None) -> list[int]:
    """The pids the tree wrote to ``path``, once it has (another process: polled)."""

    async def probe() -> list[int] | None:
        if task is not None and task.done():
            raise AssertionError(f"the command ended early: {task.result()}")
        return read_pids(path)

    return await eventually(probe, what=f"pids in {path}")


# --- argv: one argument per placeholder, no shell ---------------------------------------------


async def test_hostile_payload_values_arrive_as_one_literal_argument_each(tmp_path: Path) -> None:
    commands = executor(
        show={
            "argv": [
                sys.executable,
                "-c",
                PRINT_ARGV,
                *[f"{{payload.v{i}}}" for i in range(len(HOSTILE))],
                "--to={payload.nested.email}",
                "{payload.n}",
                "{run.attempt}",
                "{{literal}}",
            ],
            "cwd": str(tmp_path),
        }
    )
    payload = {f"v{i}": v for i, v in enumerate(HOSTILE)}
    payload |= {"nested": {"email": "a b@example.com"}, "n": [1, "x"]}
    result = await commands.execute(ctx(payload, attempt=2), {"type": "command", "name": "show"})
    assert result["exit_code"] == 0
    assert json.loads(result["stdout"]) == [
        *HOSTILE,
        "--to=a b@example.com",
        '[1,"x"]',
        "2",
        "{literal}",
    ]
    assert not os.path.exists("/tmp/duetime-pwned")  # noqa: ASYNC240 - a stat
    assert os.listdir(tmp_path) == []  # no redirection happened in the working directory


async def test_a_missing_payload_field_or_unknown_command_fails_for_good() -> None:
    commands = executor(show={"argv": [sys.executable, "-c", PRINT_ARGV, "{payload.who}"]})
    with pytest.raises(CommandRejected, match="no field 'who'"):
        await commands.execute(ctx({}), {"type": "command", "name": "show"})
    with pytest.raises(CommandRejected, match="not in this worker's allow-list"):
        await commands.execute(ctx({}), {"type": "command", "name": "rm"})


@pytest.mark.parametrize(
    ("config", "field"),
    [
        ({"x": {"argv": []}}, "commands.x.argv"),
        ({"x": {"argv": ["{payload.prog}"]}}, "commands.x.argv"),
        ({"x": {"argv": ["echo", "{payload}"]}}, "commands.x.argv"),
        ({"x": {"argv": ["echo", "{env.HOME}"]}}, "commands.x.argv"),
        ({"x": {"argv": ["echo", "a}b"]}}, "commands.x.argv"),
        ({"x": {"argv": ["echo"], "shell": True}}, "commands.x.shell"),
        ({"x": {"argv": ["echo"], "timeout": 0}}, "commands.x.timeout"),
        ({"x": {"argv": ["echo"], "retryable_exit_codes": [0]}}, "commands.x.retryable_exit_codes"),
        ({"bad name": {"argv": ["echo"]}}, "commands.bad name"),
    ],
)
def test_the_allow_list_is_validated(config: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        load_commands(json.dumps(config))
    assert caught.value.field == field


def test_the_allow_list_can_be_a_file(tmp_path: Path) -> None:
    path = tmp_path / "commands.json"
    path.write_text(json.dumps({"hello": {"argv": ["echo", "hi"]}}))
    assert load_commands(str(path))["hello"].argv == ("echo", "hi")
    with pytest.raises(ValidationError, match="cannot read"):
        load_commands(str(tmp_path / "missing.json"))


# --- exit statuses and output tails -------------------------------------------------------------


async def test_exit_statuses_are_classified_and_output_tails_kept() -> None:
    script = (
        "import sys; print('out' * 3000); print('boom', file=sys.stderr); "
        "sys.exit(int(sys.argv[1]))"
    )
    commands = executor(
        run={
            "argv": [sys.executable, "-c", script, "{payload.code}"],
            "retryable_exit_codes": [75],
        },
        anycode={"argv": [sys.executable, "-c", script, "{payload.code}"]},
    )
    with pytest.raises(CommandFailed, match="exited with status 75") as retryable:
        await commands.execute(ctx({"code": 75}), {"type": "command", "name": "run"})
    notes = "\n".join(retryable.value.__notes__)
    assert "boom" in notes
    assert "earlier bytes cut" in notes  # 9,000 bytes of stdout: its end is kept
    with pytest.raises(CommandRejected, match="status 3 \\(not retryable\\)"):
        await commands.execute(ctx({"code": 3}), {"type": "command", "name": "run"})
    with pytest.raises(CommandFailed, match="status 3"):  # no list: every status is retried
        await commands.execute(ctx({"code": 3}), {"type": "command", "name": "anycode"})


# --- timeout and cancel end the whole process group ----------------------------------------------


@pytest.mark.parametrize("kind", ["polite", "stubborn"])
async def test_a_timeout_ends_the_child_and_its_grandchild(tmp_path: Path, kind: str) -> None:
    pidfile = tmp_path / "pids"
    commands = executor(
        tree={
            "argv": [sys.executable, "-c", TREE, str(pidfile), kind],
            "timeout": 2,
            "kill_grace": 0.2,
        }
    )
    task = asyncio.create_task(commands.execute(ctx({}), {"type": "command", "name": "tree"}))
    child, grandchild = await pids_in(pidfile, task)
    with pytest.raises(CommandTimeout, match="timed out after 2s"):
        await task
    assert not alive(child)
    assert not alive(grandchild)  # a stubborn one (ignoring SIGTERM) got SIGKILL


async def test_a_cancel_ends_the_child_and_its_grandchild(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    commands = executor(
        tree={
            "argv": [sys.executable, "-c", TREE, str(pidfile), "stubborn"],
            "kill_grace": 0.2,
        }
    )
    task = asyncio.create_task(commands.execute(ctx({}), {"type": "command", "name": "tree"}))
    child, grandchild = await pids_in(pidfile, task)
    assert alive(child)
    assert alive(grandchild)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not alive(child)
    assert not alive(grandchild)


# --- end to end: registration, a real worker, the run's result ----------------------------------


@pytest.fixture
async def command_app(store_url: str, tmp_path: Path) -> AsyncIterator[Harness]:
    commands = {
        "show": {"argv": [sys.executable, "-c", PRINT_ARGV, "{payload.text}", "{run.id}"]},
        "tree": {
            "argv": [sys.executable, "-c", TREE, str(tmp_path / "pids"), "stubborn"],
            "kill_grace": 0.2,
        },
        "slow": {
            "argv": [sys.executable, "-c", SLOW],
            "timeout": 1,
            "kill_grace": 0.2,
        },
    }
    settings = Settings(database_url=store_url, commands=json.dumps(commands), **FAST)  # type: ignore[arg-type]
    async with AsyncApp(settings=settings, migrate=True) as app:
        h = Harness(app, Receiver())
        try:
            yield h
        finally:
            await h.stop_workers()


async def test_an_unknown_command_is_refused_at_registration(command_app: Harness) -> None:
    app = command_app.app
    with pytest.raises(UnknownTask, match=r"duetime\.command:show"):
        await app.schedule("c.show", target={"type": "command", "name": "show"}, cron=YEARLY)
    job = await app.schedule(
        "c.later",
        target={"type": "command", "name": "not-yet"},
        cron=YEARLY,
        allow_unregistered=True,
    )
    assert job.task == "duetime.command:not-yet"
    with pytest.raises(ValidationError) as caught:
        await app.schedule(
            "c.text", target={"type": "command", "name": "x", "argv": ["rm"]}, cron=YEARLY
        )
    assert caught.value.field == "target.argv"


async def test_a_worker_serves_its_commands_and_the_run_keeps_the_output(
    command_app: Harness,
) -> None:
    app = command_app.app
    worker = command_app.start_worker()
    assert "duetime.command:show" in worker.tasks
    await worker_registered(app, "duetime.command:show")
    job = await app.schedule("c.show", target={"type": "command", "name": "show"}, cron=YEARLY)
    assert job.task == "duetime.command:show"
    assert job.target == {"type": "command", "name": "show"}
    run = await app.trigger("c.show", payload={"text": "hello; $(world)"})
    done = await command_app.settled(run.id)
    assert done.state is RunState.SUCCEEDED
    assert done.result is not None
    assert json.loads(done.result["stdout"]) == ["hello; $(world)", str(run.id)]


async def test_cancelling_a_command_run_ends_its_process_group(
    command_app: Harness, tmp_path: Path
) -> None:
    app = command_app.app
    worker = command_app.start_worker()
    await worker_registered(app, "duetime.command:tree")
    await app.schedule(
        "c.tree",
        target={"type": "command", "name": "tree"},
        cron=YEARLY,
        retry=Retry(max_attempts=1),
    )
    run = await app.trigger("c.tree")
    child, grandchild = await pids_in(tmp_path / "pids")
    await app.cancel_run(run.id)
    done = await command_app.settled(run.id)
    assert done.state is RunState.CANCELLED
    async with command_app.changed:  # the worker's attempt ended (after the process group)
        await asyncio.wait_for(
            command_app.changed.wait_for(
                lambda: any(c.run_id == run.id for c in command_app.completions)
            ),
            30,
        )
    assert not alive(child)
    assert not alive(grandchild)
    assert worker.id


async def worker_registered(app: AsyncApp, task: str) -> None:
    await eventually(lambda: app.store.tasks_known([task]), what=f"a worker serving {task}")


async def test_changing_a_jobs_target_to_an_unknown_command_is_refused(
    command_app: Harness,
) -> None:
    app = command_app.app
    await app.schedule("c.job", task="duetime.noop", cron=YEARLY)
    with pytest.raises(UnknownTask, match="nobody"):
        await app.update_job("c.job", target={"type": "command", "name": "nobody"})
    changed = await app.update_job(
        "c.job", target={"type": "command", "name": "nobody"}, allow_unregistered=True
    )
    assert changed.task == "duetime.command:nobody"


async def test_the_command_gets_its_env_and_the_runs_not_the_workers_secrets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DUETIME_SECRET_CRM_TOKEN", "hush")
    monkeypatch.setenv("DUETIME_DATABASE_URL", "postgresql://u:pw@db/x")
    monkeypatch.setenv("KEEP_ME", "kept")
    script = "import json, os; print(json.dumps(dict(os.environ)))"
    commands = executor(env={"argv": [sys.executable, "-c", script], "env": {"EXTRA": "1"}})
    run = ctx({})
    result = await commands.execute(run, {"type": "command", "name": "env"})
    seen = json.loads(result["stdout"])
    assert (seen["KEEP_ME"], seen["EXTRA"]) == ("kept", "1")
    assert seen["DUETIME_RUN_ID"] == str(run.run_id)
    assert seen["DUETIME_FENCING_TOKEN"] == "7"
    assert "DUETIME_SECRET_CRM_TOKEN" not in seen
    assert "DUETIME_DATABASE_URL" not in seen


async def test_a_command_timeout_is_a_timed_out_attempt_with_its_output(
    command_app: Harness,
) -> None:
    app = command_app.app
    command_app.start_worker()
    await worker_registered(app, "duetime.command:slow")
    await app.schedule(
        "c.slow",
        target={"type": "command", "name": "slow"},
        cron=YEARLY,
        retry=Retry(max_attempts=1),
    )
    run = await app.trigger("c.slow")
    done = await command_app.settled(run.id)
    assert done.state is RunState.DEAD
    [attempt] = await app.attempts(run.id)
    assert attempt.outcome is AttemptOutcome.TIMED_OUT
    assert "timed out after 1s" in (attempt.error_message or "")
    assert "working on it" in (attempt.traceback or "")
