"""Runs, dead letters and schedule previews over HTTP against a real server, on both stores."""

from __future__ import annotations

import uuid

import pytest

from tests.api.apikit import Keys, ServerProcess, make_dead_run, make_job, ok, problem

pytestmark = pytest.mark.slow


def test_get_run_with_attempts_and_list_runs(server: ServerProcess, keys: Keys) -> None:
    with server.client(keys.acme_operator) as c:
        job = make_job(c)
        dead = make_dead_run(c, job)
        assert dead["state"] == "dead"
        assert dead["reason"] == "permanent_error"
        assert dead["last_error_class"] == "BoomError"
        assert dead["last_error_message"] == "boom"
        (attempt,) = dead["attempts"]
        assert attempt["outcome"] == "failed"
        assert attempt["number"] == 1
        assert attempt["worker_id"].startswith("acme/worker-")
        assert attempt["error_message"] == "boom"
        assert attempt["traceback"] is None  # a remote worker's failure: no traceback here
        assert attempt["duration_seconds"] >= 0
        scheduled = [ok(c.post(f"/jobs/{job['id']}/trigger"), 201) for _ in range(3)]

        mine = ok(c.get("/runs", params={"job_id": job["id"]}))
        assert {r["id"] for r in mine["items"]} == {dead["id"], *(r["id"] for r in scheduled)}
        only_dead = ok(c.get("/runs", params={"job_id": job["id"], "state": "dead"}))
        assert [r["id"] for r in only_dead["items"]] == [dead["id"]]
        seen: list[str] = []
        cursor = None
        while True:
            params = {"job_id": job["id"], "limit": 1, **({"cursor": cursor} if cursor else {})}
            page = ok(c.get("/runs", params=params))
            seen += [r["id"] for r in page["items"]]
            if (cursor := page["next_cursor"]) is None:
                break
        assert sorted(seen) == sorted(r["id"] for r in mine["items"])
        problem(c.get("/runs", params={"cursor": "garbage"}), 422, "cursor")
        problem(c.get("/runs", params={"state": "sleeping"}), 422, "state")
        problem(c.get("/runs", params={"job_id": "nope"}), 404)
        problem(c.get("/runs", params={"job_id": str(uuid.uuid4())}), 404)
        problem(c.get("/runs/nope"), 404)
        problem(c.get(f"/runs/{uuid.uuid4()}"), 404)


def test_cancel_run(server: ServerProcess, keys: Keys) -> None:
    with server.client(keys.acme_operator) as c:
        job = make_job(c)
        run = ok(c.post(f"/jobs/{job['id']}/trigger"), 201)
        cancelled = ok(c.post(f"/runs/{run['id']}/cancel"))
        assert cancelled["state"] == "cancelled"
        assert cancelled["finished_at"]
        problem(c.post(f"/runs/{run['id']}/cancel"), 409)
        problem(c.post(f"/runs/{uuid.uuid4()}/cancel"), 404)


def test_dead_letters_list_and_replay(server: ServerProcess, keys: Keys) -> None:
    with server.client(keys.acme_operator) as c:
        job = make_job(c)
        first, second, third = (make_dead_run(c, job) for _ in range(3))
        listed = ok(c.get("/dead-letters", params={"job_id": job["id"]}))
        assert {r["id"] for r in listed["items"]} == {first["id"], second["id"], third["id"]}
        assert all(r["state"] == "dead" for r in ok(c.get("/dead-letters"))["items"])

        replayed = ok(c.post(f"/dead-letters/{first['id']}/replay"))
        assert replayed["state"] == "scheduled"
        assert replayed["replays"] == 1
        problem(c.post(f"/dead-letters/{first['id']}/replay"), 409)  # not dead any more
        problem(c.post(f"/dead-letters/{uuid.uuid4()}/replay"), 404)
        problem(c.post("/dead-letters/nope/replay"), 404)

        problem(c.post("/dead-letters/replay", json={}), 422, "job_id")
        problem(c.post("/dead-letters/replay", json={"job_id": "nope"}), 404)
        bulk = ok(c.post("/dead-letters/replay", json={"job_id": job["id"], "limit": 1}))
        assert bulk["count"] == 1
        assert bulk["replayed"][0] in {second["id"], third["id"]}
        rest = ok(c.post("/dead-letters/replay", json={"all": True, "limit": 1000}))
        assert {second["id"], third["id"]} - set(bulk["replayed"]) <= set(rest["replayed"])
        assert ok(c.get("/dead-letters", params={"job_id": job["id"]}))["items"] == []


def test_schedule_preview(server: ServerProcess, keys: Keys) -> None:
    with server.client(keys.acme_viewer) as c:
        preview = ok(
            c.post(
                "/schedules/preview",
                json={
                    "cron": "30 2 * * *",
                    "tz": "America/New_York",
                    "after": "2026-03-07T00:00:00Z",
                    "count": 3,
                },
            )
        )
        assert [o["utc"] for o in preview["items"]] == [
            "2026-03-07T07:30:00Z",
            "2026-03-08T07:00:00Z",
            "2026-03-09T06:30:00Z",
        ]
        assert preview["items"][1]["local"] == "2026-03-08T03:00:00-04:00"
        assert preview["items"][1]["dst_note"]
        assert preview["items"][0]["dst_note"] is None
        problem(c.post("/schedules/preview", json={"cron": "61 * * * *"}), 422, "cron")
        problem(c.post("/schedules/preview", json={"cron": "* * * * *", "count": 0}), 422, "count")
        problem(c.post("/schedules/preview", json={}), 422, "cron")
        problem(c.post("/schedules/preview", json={"job_id": str(uuid.uuid4())}), 404)
    with server.client(keys.acme_operator) as c:
        job = make_job(c, cron="0 12 * * *", tz="Europe/Paris")
        for_job = ok(c.post("/schedules/preview", json={"job_id": job["id"], "count": 2}))
        assert for_job["tz"] == "Europe/Paris"
        assert for_job["items"][0]["utc"] == job["next_fire_at"]
        assert all(o["local"].startswith(o["local"][:10]) for o in for_job["items"])
        problem(
            c.post("/schedules/preview", json={"job_id": job["id"], "cron": "* * * * *"}),
            422,
            "cron",
        )
