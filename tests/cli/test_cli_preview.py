"""``duetime preview``: fire instants of a cron expression, no database."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from clikit import Invoke, assert_usage_error

UTC_FORMAT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def preview_json(invoke: Invoke, *args: str) -> list[dict]:
    result = invoke("preview", *args, "--json", use_db=False)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return json.loads(result.stdout)


def test_dst_gap_moves_a_fire_and_notes_it(invoke: Invoke) -> None:
    fires = preview_json(
        invoke,
        "30 2 * * *",
        "--tz",
        "America/New_York",
        "--from",
        "2026-03-07T00:00:00Z",
        "--count",
        "3",
    )
    assert [f["utc"] for f in fires] == [
        "2026-03-07T07:30:00Z",
        "2026-03-08T07:00:00Z",
        "2026-03-09T06:30:00Z",
    ]
    assert [f["local"] for f in fires] == [
        "2026-03-07T02:30:00-05:00",
        "2026-03-08T03:00:00-04:00",
        "2026-03-09T02:30:00-04:00",
    ]
    assert fires[0]["dst_note"] is None
    assert fires[1]["dst_note"]
    assert "02:30" in fires[1]["dst_note"]
    assert fires[2]["dst_note"] is None


def test_dst_overlap_fires_once(invoke: Invoke) -> None:
    fires = preview_json(
        invoke,
        "30 1 * * *",
        "--tz",
        "America/New_York",
        "--from",
        "2026-10-31T12:00:00Z",
        "--count",
        "3",
    )
    assert [f["utc"] for f in fires] == [
        "2026-11-01T05:30:00Z",
        "2026-11-02T06:30:00Z",
        "2026-11-03T06:30:00Z",
    ]


def test_from_with_an_offset_is_strictly_after(invoke: Invoke) -> None:
    fires = preview_json(invoke, "0 * * * *", "--from", "2026-01-01T10:00:00+01:00", "--count", "2")
    assert [f["utc"] for f in fires] == ["2026-01-01T10:00:00Z", "2026-01-01T11:00:00Z"]
    assert fires[0]["local"] == "2026-01-01T10:00:00+00:00"


def test_defaults_ten_fires_after_now(invoke: Invoke) -> None:
    before = datetime.now(UTC)
    fires = preview_json(invoke, "* * * * *")
    assert len(fires) == 10
    assert all(UTC_FORMAT.match(f["utc"]) for f in fires)
    assert datetime.fromisoformat(fires[0]["utc"]) > before.replace(second=0, microsecond=0)
    assert all(set(f) == {"utc", "local", "dst_note"} for f in fires)


def test_text_marks_dst_moves(invoke: Invoke) -> None:
    result = invoke(
        "preview",
        "30 2 * * *",
        "--tz",
        "America/New_York",
        "--from",
        "2026-03-07T00:00:00Z",
        "--count",
        "3",
        use_db=False,
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 4
    assert "2026-03-08T07:00:00Z" in lines[2]
    assert "2026-03-08T03:00:00-04:00" in lines[2]
    assert "moved from 02:30" in lines[2]
    assert lines[1].rstrip().endswith("-")


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["* * * * *", "--count", "0"], ["count"]),
        (["* * * * *", "--count", "1001"], ["count"]),
        (["* * * * *", "--from", "2026-03-07T00:00:00"], ["--from", "offset"]),
        (["* * * * *", "--from", "yesterday"], ["--from", "ISO 8601"]),
        (["* * * * *", "--tz", "Mars/Base"], ["tz", "Mars/Base"]),
        (["0 25 * * *"], ["cron", "hour"]),
        (["0 0 30 2 *"], ["cron", "never fires"]),
        (["0 0 1 1 * * 2030"], ["cron", "7 fields"]),
    ],
)
def test_rejects_invalid_input(invoke: Invoke, args: list[str], needles: list[str]) -> None:
    assert_usage_error(invoke("preview", *args, use_db=False), *needles)


def test_opens_no_database(invoke: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DUETIME_DATABASE_URL", str(tmp_path / "env.db"))
    assert invoke("preview", "* * * * *", "--count", "1", use_db=False).exit_code == 0
    result = invoke("preview", "* * * * *", "--count", "1", "--tenant", "acme")
    assert result.exit_code == 0, result.output
    assert list(tmp_path.iterdir()) == []
