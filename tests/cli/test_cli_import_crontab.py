"""``duetime jobs import --crontab FILE``: crontab lines become command jobs and the allow-list
the workers run them from; refused lines are named by number; a real worker runs an imported
command. The fixture ``data/crontab`` holds every case."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from clikit import Invoke, assert_usage_error, ok
from realcli import EXECUTABLE, environment, needs_executable
from tests.waiting import eventually_sync
from typer.testing import CliRunner

from duetime import AsyncApp
from duetime._types import Run, RunState
from duetime.cli import cli
from duetime.importers.crontab import convert, shell_reason
from duetime.targets.command import load_commands

FIXTURE = Path(__file__).parent / "data" / "crontab"

BERLIN, NEW_YORK, APP = "Europe/Berlin", "America/New_York", "/srv/app"
IMPORTED = {
    # line → (cron, tz, argv, cwd)
    9: ("30 2 * * *", BERLIN, ["/usr/local/bin/backup", "--full", "--label", "nightly run"], None),
    10: ("*/15 * * * *", BERLIN, ["/usr/bin/env", "python3", "-m", "reports.refresh"], None),
    11: ("0 9 * * mon-fri", BERLIN, ["curl", "-fsS", "https://example.com/ping%20me"], None),
    14: ("0 0 * * *", BERLIN, ["/usr/bin/find", "/tmp", "-mtime", "+7", "-delete"], APP),
    15: ("0 * * * *", BERLIN, ["/usr/local/bin/rotate", "{{logs}}"], APP),
    19: ("0 6 1 * *", NEW_YORK, ["/usr/local/bin/monthly-invoice"], APP),
    29: ("0 12 * * *", NEW_YORK, ["/usr/bin/date"], APP),  # TZ= only reaches the environment
}

REFUSED = {
    16: "@reboot runs when cron starts",
    20: "needs a shell: a pipe (|)",
    21: "needs a shell: a control operator (& or &&)",
    22: "needs a shell: a variable expansion or substitution ($)",
    23: "an unescaped %",
    24: "needs a shell: a glob (*)",
    25: "expected five time fields and a command",
    26: "is not a cron schedule (minute field '61' is invalid",
    27: "@fortnightly is not a cron nickname",
}


def jobs(invoke: Invoke) -> dict[str, dict[str, Any]]:
    listed = json.loads(ok(invoke("jobs", "list", "--json", "--limit", "100")).stdout)["items"]
    out: dict[str, dict[str, Any]] = {}
    for item in listed:
        shown = json.loads(ok(invoke("jobs", "show", item["name"], "--json")).stdout)["job"]
        out[item["name"]] = shown
    return out


def by_line(found: dict[str, dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {job["metadata"]["crontab_line"]: job for job in found.values()}


def test_refused_lines_are_listed_by_number_and_nothing_is_written(
    invoke: Invoke, tmp_path: Path
) -> None:
    out = tmp_path / "commands.json"
    result = invoke("jobs", "import", "--crontab", str(FIXTURE), "--commands-out", str(out))
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith(f"error: {len(REFUSED)} line(s) of {FIXTURE} cannot be imported")
    for number, reason in REFUSED.items():
        [line] = [x for x in lines if x.startswith(f"{FIXTURE}: line {number}: ")]
        assert reason in line, line
    assert "Traceback" not in result.output
    assert not out.exists()
    assert jobs(invoke) == {}


def test_the_importable_lines_become_command_jobs_and_the_allow_list(
    invoke: Invoke, tmp_path: Path
) -> None:
    out = tmp_path / "commands.json"
    args = ("jobs", "import", "--crontab", str(FIXTURE), "--commands-out", str(out))
    result = ok(invoke(*args, "--skip-refused", "--allow-unregistered"))
    assert "imported 7 jobs" in result.stdout
    assert "(7 created, 0 updated)" in result.stdout
    assert "line 3: MAILTO=ops@example.com is not carried over" in result.stderr
    found = jobs(invoke)
    lines = by_line(found)
    assert sorted(lines) == sorted(IMPORTED)
    allowed = json.loads(out.read_text())
    assert load_commands(out.read_text()).keys() == allowed.keys() == found.keys()
    for number, (cron, tz, argv, cwd) in IMPORTED.items():
        job = lines[number]
        assert job["name"].startswith("cron-")
        assert (job["schedule"]["cron"], job["schedule"]["tz"]) == (cron, tz)
        assert job["target"] == {"type": "command", "name": job["name"]}
        assert job["task"] == f"duetime.command:{job['name']}"
        assert (job["misfire_policy"], job["overlap_policy"]) == ("fire_once", "skip")
        entry = allowed[job["name"]]
        assert entry["argv"] == argv
        assert entry.get("cwd") == cwd
        assert entry["env"]["PATH"] == "/usr/local/bin:/usr/bin:/bin"
        assert "MAILTO" not in entry["env"]
        assert "CRON_TZ" not in entry["env"]
    assert "HOME" not in allowed[lines[9]["name"]]["env"]  # assigned after line 9
    assert allowed[lines[29]["name"]]["env"]["TZ"] == "Asia/Tokyo"
    assert "TZ" not in allowed[lines[19]["name"]]["env"]
    assert "line 28: TZ=Asia/Tokyo is passed to the commands' environment" in result.stderr
    # the same crontab again: the same names, updated in place, the allow-list unchanged
    again = ok(invoke(*args, "--skip-refused", "--allow-unregistered"))
    assert "(0 created, 7 updated)" in again.stdout
    assert jobs(invoke).keys() == found.keys()
    assert json.loads(out.read_text()) == allowed


def test_allow_shell_wraps_shell_lines_in_the_crontabs_shell(
    invoke: Invoke, tmp_path: Path
) -> None:
    out = tmp_path / "commands.json"
    result = invoke(
        "jobs", "import", "--crontab", str(FIXTURE), "--commands-out", str(out),
        "--allow-shell", "--skip-refused", "--allow-unregistered", "--like-cron",
    )  # fmt: skip
    ok(result)
    lines = by_line(jobs(invoke))
    allowed = json.loads(out.read_text())
    assert allowed[lines[20]["name"]]["argv"] == [
        "/bin/bash", "-c", "pg_dump mydb | gzip > /backups/mydb.sql.gz"
    ]  # fmt: skip
    assert allowed[lines[22]["name"]]["argv"][2] == "echo $HOME >> /tmp/seen"
    assert sorted(lines) == sorted([*IMPORTED, 20, 21, 22, 24])
    still = [n for n in REFUSED if n not in lines]
    assert still == [16, 23, 25, 26, 27]  # @reboot, %, and bad lines are refused even so
    for number in still:
        assert f"line {number}: " in result.stderr
    job = lines[20]
    assert (job["misfire_policy"], job["overlap_policy"]) == ("skip", "allow")
    assert job["retry"]["max_attempts"] == 1


def test_dry_run_prints_the_jobs_and_allow_list_and_writes_nothing(
    invoke: Invoke, tmp_path: Path
) -> None:
    out = tmp_path / "commands.json"
    result = ok(
        invoke(
            "jobs", "import", "--crontab", str(FIXTURE), "--commands-out", str(out),
            "--skip-refused", "--dry-run",
        )
    )  # fmt: skip
    assert result.stdout.count("would import cron-") == len(IMPORTED)
    assert "cron '0 6 1 * *' in America/New_York" in result.stdout
    listed = json.loads(result.stdout.split("allow-list entries (DUETIME_COMMANDS):\n", 1)[1])
    assert len(listed) == len(IMPORTED)
    assert not out.exists()
    assert jobs(invoke) == {}


def test_a_system_crontab_has_a_user_column(invoke: Invoke, tmp_path: Path) -> None:
    crontab = tmp_path / "crontab"
    crontab.write_text("SHELL=/bin/sh\n17 *  * * *  root  cd / && run-parts /etc/cron.hourly\n"
                       "25 6  * * *  backup  /usr/bin/nightly --fast\n")  # fmt: skip
    out = tmp_path / "commands.json"
    base = ("jobs", "import", "--crontab", str(crontab), "--commands-out", str(out), "--tz", "UTC")
    user = invoke(*base, "--allow-unregistered")
    assert user.exit_code == 2
    assert "line 2: needs a shell: a control operator" in user.stderr
    ok(invoke(*base, "--system", "--skip-refused", "--allow-unregistered"))
    [job] = jobs(invoke).values()
    assert job["metadata"] == {"crontab_line": 3, "crontab_user": "backup"}
    assert json.loads(out.read_text())[job["name"]]["argv"] == ["/usr/bin/nightly", "--fast"]
    short = tmp_path / "short"
    short.write_text("25 6 * * * /usr/bin/nightly\n")
    refused = invoke("jobs", "import", "--crontab", str(short), "--commands-out", str(out),
                     "--tz", "UTC", "--system")  # fmt: skip
    assert refused.exit_code == 2
    assert "line 1: expected five time fields, a user and a command" in refused.stderr


def test_lines_before_any_cron_tz_need_tz(invoke: Invoke, tmp_path: Path) -> None:
    crontab = tmp_path / "crontab"
    crontab.write_text("# no zone\n0 4 * * * /usr/bin/true\n")
    out = tmp_path / "commands.json"
    args = ("jobs", "import", "--crontab", str(crontab), "--commands-out", str(out))
    refused = invoke(*args, "--allow-unregistered")
    assert refused.exit_code == 2
    assert "line 2: no time zone" in refused.stderr
    assert "pass --tz" in refused.stderr
    ok(invoke(*args, "--tz", "Asia/Tokyo", "--allow-unregistered"))
    [job] = jobs(invoke).values()
    assert job["schedule"]["tz"] == "Asia/Tokyo"
    crontab.write_text("CRON_TZ=Mars/Olympus\n0 4 * * * /usr/bin/true\n")
    unknown = invoke(*args, "--allow-unregistered")
    assert unknown.exit_code == 2
    assert "line 2: unknown time zone 'Mars/Olympus' (from CRON_TZ)" in unknown.stderr


def test_a_crontab_from_stdin(tmp_path: Path) -> None:
    out = tmp_path / "commands.json"
    db = str(tmp_path / "duetime.db")
    result = CliRunner().invoke(
        cli,
        ["jobs", "import", "--crontab", "-", "--commands-out", str(out), "--db", db,
         "--allow-unregistered"],
        input="CRON_TZ=UTC\n0 4 * * * /usr/bin/true\n",
        catch_exceptions=False,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "from - (1 created, 0 updated)" in result.stdout
    assert [c["argv"] for c in json.loads(out.read_text()).values()] == [["/usr/bin/true"]]


def test_the_allow_list_file_is_merged_and_checked(invoke: Invoke, tmp_path: Path) -> None:
    crontab = tmp_path / "crontab"
    crontab.write_text("CRON_TZ=UTC\n0 4 * * * /usr/bin/true\n")
    out = tmp_path / "commands.json"
    out.write_text(json.dumps({"export": {"argv": ["/usr/bin/export"]}}))
    args = ("jobs", "import", "--crontab", str(crontab), "--commands-out", str(out))
    ok(invoke(*args, "--allow-unregistered"))
    merged = json.loads(out.read_text())
    assert merged["export"] == {"argv": ["/usr/bin/export"]}
    assert len(merged) == 2
    out.write_text("[1, 2]")
    assert_usage_error(invoke(*args, "--allow-unregistered"), "holds no JSON object")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--crontab", "{tmp}/missing"), "missing: cannot read it"),
        (("--crontab", "{good}"), "--crontab needs --commands-out FILE"),
        (("--crontab", "{good}", "--commands-out", "{tmp}/o.json", "--tz", "Mars/Base"),
         "--tz: unknown time zone 'Mars/Base'"),
        (("{good}", "--crontab", "{good}"), "give one of FILE.jsonl"),
    ],
    ids=["missing-file", "no-commands-out", "bad-tz", "two-sources"],
)  # fmt: skip
def test_bad_invocations_exit_2(
    invoke: Invoke, tmp_path: Path, args: tuple[str, ...], needle: str
) -> None:
    good = tmp_path / "good"
    good.write_text("CRON_TZ=UTC\n0 4 * * * /usr/bin/true\n")
    argv = [a.format(tmp=tmp_path, good=good) for a in args]
    assert_usage_error(invoke("jobs", "import", *argv), needle)


def test_a_job_of_a_command_no_worker_serves_yet_says_how_to_proceed(
    invoke: Invoke, tmp_path: Path
) -> None:
    crontab = tmp_path / "crontab"
    crontab.write_text("CRON_TZ=UTC\n0 4 * * * /usr/bin/true\n")
    out = tmp_path / "commands.json"
    result = invoke("jobs", "import", "--crontab", str(crontab), "--commands-out", str(out))
    assert_usage_error(result, "no worker serves the command", "no job was written")
    assert out.exists()  # written first: deploy it, start the workers, import again


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("/bin/backup --full", None),
        ("/bin/echo 'a | b' \"c > d\" e\\;f", None),
        ("/bin/echo 'it''s' \"$HOME\"", "a variable expansion or substitution ($)"),
        ("/bin/echo `date`", "a command substitution (backticks)"),
        ("/bin/echo $(date)", "a variable expansion or substitution ($)"),
        ("/bin/run < input", "a redirection (<)"),
        ("/bin/run 2>&1", "a redirection (>)"),
        ("/bin/run; /bin/other", "a command separator (;)"),
        ("/bin/run &", "a control operator (& or &&)"),
        ("/bin/ls ~/x", "a home directory expansion (~)"),
        ("/bin/ls a~b", None),
        ("/bin/run # note", "a shell comment (#)"),
        ("/bin/run a#b", None),
        ("/bin/ls file?.txt", "a glob (?)"),
        ("/bin/ls [ab].txt", "a glob ([…])"),
        ("(cd /x)", "a subshell or grouping (parentheses)"),
        ("LANG=C /bin/sort", "a variable assignment before the command (LANG=…)"),
        ("cd /srv", "the shell keyword or builtin 'cd'"),
        ("/bin/echo 'open", "an unclosed ' quote"),
        ("/bin/cp a.{txt,bak}", "a brace expansion ({a,b} in bash)"),
        ("/bin/echo {1..3}", "a brace expansion ({a,b} in bash)"),
        ("/bin/echo '{a,b}' {x}", None),
        ('/bin/echo "a\\\\b" "\\"q\\""', None),
        ('/bin/echo "\\$HOME"', "a \\$ or \\` inside double quotes"),
        ('/bin/echo "\\`x\\`"', "a \\$ or \\` inside double quotes"),
    ],
)
def test_what_needs_a_shell(command: str, reason: str | None) -> None:
    assert shell_reason(command) == reason


@pytest.mark.slow
@needs_executable
def test_a_worker_runs_an_imported_command(tmp_path: Path) -> None:
    """The allow-list written by the import is the worker's DUETIME_COMMANDS; a triggered
    run of the imported job runs the crontab's command with the crontab's environment."""
    assert EXECUTABLE is not None
    db = str(tmp_path / "duetime.db")
    marker = tmp_path / "ran"
    touch = shutil.which("touch")
    printenv = shutil.which("printenv")
    assert touch
    assert printenv
    crontab = tmp_path / "crontab"
    crontab.write_text(
        f"CRON_TZ=UTC\nGREETING=from cron\n0 3 * * * {touch} {marker}\n"
        f"0 4 * * * {printenv} GREETING\n"
    )
    out = tmp_path / "commands.json"
    imported = subprocess.run(
        [EXECUTABLE, "jobs", "import", "--crontab", str(crontab), "--commands-out", str(out),
         "--allow-unregistered", "--db", db],
        env=environment(), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    names = list(json.loads(out.read_text()))
    log = tmp_path / "worker.log"
    with log.open("w") as sink:
        worker = subprocess.Popen(
            [EXECUTABLE, "worker", "--db", db],
            env=environment({"DUETIME_COMMANDS": str(out), "DUETIME_WORKER_POLL_INTERVAL": "0.2"}),
            stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        run_ids = []
        for name in names:
            triggered = subprocess.run(
                [EXECUTABLE, "jobs", "trigger", name, "--db", db],
                env=environment(), capture_output=True, text=True, timeout=60, check=True,
            )  # fmt: skip
            run_ids.append(triggered.stdout.strip())

        def shown(run_id: str) -> Run | None:
            async def read() -> Run:
                async with AsyncApp(db) as app:
                    return await app.run(uuid.UUID(run_id))

            run = asyncio.run(read())
            return run if run.state in (RunState.SUCCEEDED, RunState.DEAD) else None

        touched = eventually_sync(lambda: shown(run_ids[0]), what="the touch run",
                                  details=log.read_text)  # fmt: skip
        printed = eventually_sync(lambda: shown(run_ids[1]), what="the printenv run",
                                  details=log.read_text)  # fmt: skip
    finally:
        os.kill(worker.pid, signal.SIGTERM)
        worker.wait(timeout=60)
    assert touched.state is RunState.SUCCEEDED, touched
    assert marker.exists()
    assert printed.state is RunState.SUCCEEDED, printed
    assert printed.result["stdout"] == "from cron\n"


def test_a_line_the_app_would_refuse_stops_the_import_before_any_job(
    invoke: Invoke, tmp_path: Path
) -> None:
    """Line 3 never fires (app.schedule refuses it): line 2's job must not be written first;
    --skip-refused leaves line 3 and its command out."""
    crontab = tmp_path / "crontab"
    crontab.write_text("CRON_TZ=UTC\n0 4 * * * /usr/bin/true\n0 0 30 2 * /usr/bin/false\n")
    out = tmp_path / "commands.json"
    args = ("jobs", "import", "--crontab", str(crontab), "--commands-out", str(out),
            "--allow-unregistered")  # fmt: skip
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    assert f"{crontab}: line 3: cron: schedule never fires" in result.stderr
    assert json.loads(ok(invoke("jobs", "list", "--json")).stdout)["items"] == []
    assert not out.exists()
    ok(invoke(*args, "--skip-refused"))
    assert [c["argv"] for c in json.loads(out.read_text()).values()] == [["/usr/bin/true"]]
    assert [job["metadata"]["crontab_line"] for job in jobs(invoke).values()] == [2]


def test_only_newlines_end_a_line(invoke: Invoke, tmp_path: Path) -> None:
    """cron splits its file at newlines only: a form feed or vertical tab is part of the
    command (str.splitlines would cut the command there and import what is left)."""
    crontab = tmp_path / "crontab"
    crontab.write_text("CRON_TZ=UTC\r\n0 4 * * * /usr/bin/printf a\vb\x0cc\r\n", newline="")
    result = ok(invoke("jobs", "import", "--crontab", str(crontab), "--dry-run"))
    assert r'"a\u000bb\fc"' in result.stdout


def test_the_allow_list_file_keeps_its_permissions(invoke: Invoke, tmp_path: Path) -> None:
    """The workers may run as another user: the file is not made private (mkstemp's 0600)."""
    crontab = tmp_path / "crontab"
    crontab.write_text("CRON_TZ=UTC\n0 4 * * * /usr/bin/true\n")
    out = tmp_path / "commands.json"
    args = ("jobs", "import", "--crontab", str(crontab), "--commands-out", str(out),
            "--allow-unregistered")  # fmt: skip
    umask = os.umask(0o022)
    try:
        ok(invoke(*args))
        assert out.stat().st_mode & 0o777 == 0o644
        out.chmod(0o640)
        ok(invoke(*args))
        assert out.stat().st_mode & 0o777 == 0o640
    finally:
        os.umask(umask)


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("/bin/echo 'open", "an unclosed ' quote: neither a shell nor duetime can split"),
        ('/bin/echo "open $HOME', 'an unclosed " quote: neither a shell nor duetime can split'),
        ("/bin/echo a\0b", "a NUL byte in the command"),
    ],
)
def test_a_command_no_shell_could_run_is_refused_with_its_line_even_with_allow_shell(
    command: str, reason: str
) -> None:
    result = convert(f"CRON_TZ=UTC\n# note\n*/5 * * * * {command}\n", allow_shell=True)
    assert result.commands == {}
    [refused] = result.refused
    assert refused.line == 3
    assert refused.reason.startswith(reason)
