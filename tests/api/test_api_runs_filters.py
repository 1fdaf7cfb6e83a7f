"""``GET /runs`` filtered by task and scheduled instant, with each run's worker and duration
(issue 17, the dashboard's runs page) — over HTTP against a real server, on both stores."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.api.apikit import Keys, ServerProcess, make_dead_run, make_job, ok, problem

pytestmark = pytest.mark.slow


def test_runs_filter_by_task_and_time_with_worker_and_duration(
    server: ServerProcess, keys: Keys
) -> None:
    with server.client(keys.acme_operator) as c:
        job = make_job(c)
        dead = make_dead_run(c, job)  # failed by a remote worker
        other = make_job(c)
        later = ok(c.post(f"/jobs/{other['id']}/trigger"), 201)

        mine = ok(c.get("/runs", params={"task": job["task"]}))["items"]
        assert [r["id"] for r in mine] == [dead["id"]]
        (run,) = mine
        assert run["worker"] == dead["attempts"][0]["worker_id"]
        assert run["duration_seconds"] is not None
        assert run["duration_seconds"] >= 0

        (waiting,) = ok(c.get("/runs", params={"task": other["task"]}))["items"]
        assert waiting["id"] == later["id"]
        assert waiting["worker"] is None  # never claimed
        assert waiting["duration_seconds"] is None

        at = datetime.fromisoformat(later["scheduled_for"].replace("Z", "+00:00"))
        window = {"task": other["task"]}
        since = (at - timedelta(seconds=1)).isoformat()
        until = (at + timedelta(seconds=1)).isoformat()
        assert len(ok(c.get("/runs", params={**window, "since": since}))["items"]) == 1
        assert ok(c.get("/runs", params={**window, "until": since}))["items"] == []
        both = {**window, "since": since, "until": until}
        assert len(ok(c.get("/runs", params=both))["items"]) == 1
        assert ok(c.get("/runs", params={**window, "since": until}))["items"] == []

        later_first = {"since": until, "until": since}
        problem(c.get("/runs", params=later_first), 422, "until")
        naive = datetime.now(UTC).replace(tzinfo=None).isoformat()
        problem(c.get("/runs", params={"since": naive}), 422, "since")
    with server.client(keys.globex_operator) as c:  # another tenant's task: nothing
        assert ok(c.get("/runs", params={"task": job["task"]}))["items"] == []
