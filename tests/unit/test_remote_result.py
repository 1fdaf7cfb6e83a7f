"""A remote worker's reported result is kept as JSON text within the result limit, and a
report over it is refused (422) before anything is written."""

from __future__ import annotations

import uuid

import pytest

from duetime._config import Settings
from duetime.errors import ValidationError
from duetime.worker.remote import RemoteOutcome, RemoteWorkers


def outcome(**fields: object) -> RemoteOutcome:
    return RemoteOutcome(run_id=uuid.uuid4(), token=1, outcome="succeeded", **fields)  # type: ignore[arg-type]


def test_a_result_is_kept_as_json_within_the_limit_and_refused_over_it() -> None:
    remote = RemoteWorkers(None, Settings(result_max_bytes=32), "acme")  # type: ignore[arg-type]
    assert remote._result(outcome(result={"rows": 3})) == '{"rows":3}'
    assert remote._result(outcome()) is None
    failed = RemoteOutcome(run_id=uuid.uuid4(), token=1, outcome="failed")
    assert remote._result(failed) is None
    with pytest.raises(ValidationError, match="the limit is 32") as caught:
        remote._result(outcome(result="x" * 40))
    assert caught.value.field == "result"
