"""The API from the command line: ``duetime keys create|list|revoke`` (in process), ``duetime
up`` serving the API open on loopback (tenant ``default``) or with keys (``--auth``), refusing a
non-loopback ``--host`` without ``--auth``; ``duetime server`` refusing a port in use."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from duetime.cli import cli
from tests.api.apikit import ok, problem, start, unique
from tests.waiting import eventually_sync


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DUETIME_DATABASE_URL", "DUETIME_TENANT", "FORCE_COLOR", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TTY_COMPATIBLE", "0")


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_keys_create_list_revoke(tmp_path: Path) -> None:
    db = str(tmp_path / "keys.db")
    created = run(
        "keys", "create", "--tenant", "acme", "--role", "operator", "--name", "ci", "--db", db
    )
    assert created.exit_code == 0, created.output
    assert "not shown again" in created.stderr
    secret = next(
        line.split()[-1] for line in created.stdout.splitlines() if line.startswith("key")
    )
    assert secret.startswith("dt_")
    assert len(secret) > 30

    as_json = run("keys", "create", "--tenant", "globex", "--role", "admin", "--json", "--db", db)
    assert as_json.exit_code == 0, as_json.output
    globex = json.loads(as_json.stdout)
    assert globex["tenant"] == "globex"
    assert globex["role"] == "admin"
    assert globex["key"].startswith(globex["prefix"])

    listed = json.loads(run("keys", "list", "--json", "--db", db).stdout)["items"]
    assert [(k["tenant"], k["role"], k["revoked_at"]) for k in listed] == [
        ("acme", "operator", None),
        ("globex", "admin", None),
    ]
    assert all("key" not in k and "key_hash" not in k for k in listed)
    assert secret not in run("keys", "list", "--db", db).stdout
    only_acme = json.loads(run("keys", "list", "--tenant", "acme", "--json", "--db", db).stdout)
    assert [k["tenant"] for k in only_acme["items"]] == ["acme"]

    revoked = run("keys", "revoke", globex["id"], "--db", db)
    assert revoked.exit_code == 0
    assert "revoked key" in revoked.stdout
    listed = json.loads(run("keys", "list", "--json", "--db", db).stdout)["items"]
    assert listed[1]["revoked_at"] is not None
    assert listed[0]["revoked_at"] is None

    bad_role = run("keys", "create", "--role", "root", "--db", db)
    assert bad_role.exit_code == 2
    assert "--role" in bad_role.stderr
    unknown = run("keys", "revoke", "not-an-id", "--db", db)
    assert unknown.exit_code == 2
    assert "not found" in unknown.stderr


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "example.com"])
def test_up_refuses_a_non_loopback_host_without_auth(tmp_path: Path, host: str) -> None:
    result = run("up", "--host", host, "--db", str(tmp_path / "up.db"))
    assert result.exit_code == 2
    assert "--auth" in result.stderr
    assert "loopback" in result.stderr
    assert not (tmp_path / "up.db").exists()  # refused before anything started


@pytest.mark.slow
def test_up_serves_the_api_open_on_loopback(tmp_path: Path) -> None:
    up = start(str(tmp_path / "up.db"), command="up", cwd=tmp_path)
    try:
        assert "open: no API key needed" in up.text()
        with up.client() as c:
            name = unique()
            job = ok(c.post("/jobs", json={"name": name, "task": "duetime.noop", "every": 1}), 201)
            assert job["tenant"] == "default"
            # the scheduler and worker of `up` run it
            succeeded = {"state": "succeeded"}
            eventually_sync(
                lambda: ok(c.get(f"/jobs/{job['id']}/runs", params=succeeded))["items"],
                what="a run of the job to succeed",
                details=up.text,
            )
    finally:
        assert up.stop() == 0, up.text()


@pytest.mark.slow
def test_up_with_auth_requires_keys(tmp_path: Path) -> None:
    up = start(str(tmp_path / "up.db"), "--auth", command="up", cwd=tmp_path)
    try:
        assert "API keys required" in up.text()
        with up.client() as c:
            problem(c.get("/jobs"), 401)
    finally:
        up.stop()


def test_server_refuses_a_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run("server", "--port", str(port), "--db", str(tmp_path / "s.db"))
    assert result.exit_code == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr
