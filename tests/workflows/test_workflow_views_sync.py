"""The blocking ``App.workflows`` mirrors of issue 21's methods (``register_version``,
``versions``, ``trigger``, ``detail``, ``explain``) on SQLite: the same answers as the async
service, on the App's own loop."""

from __future__ import annotations

from pathlib import Path

from duetime import RunContext
from duetime.testing import FrozenClock, FrozenSyncApp, drain_sync
from duetime.workflows.definition import Workflow
from duetime.workflows.engine import InstanceState, StepState


def test_the_sync_app_triggers_views_and_explains(tmp_path: Path, clock: FrozenClock) -> None:
    with FrozenSyncApp(str(tmp_path / "sync.db"), clock=clock) as app:

        @app.task("w.one")
        def one(ctx: RunContext) -> list[int]:
            return [1, 2]

        wf = Workflow("pair")
        first = wf.step("first", task="w.one")
        wf.step("each", task="w.one", map_over=first)
        version, created = app.workflows.register_version(wf)
        assert (version.version, created) == (1, True)
        assert app.workflows.register_version(wf)[1] is False
        assert app.workflows.versions("pair") == [1]

        made = app.workflows.trigger("pair", payload={"n": 1}, idempotency_key="once")
        assert (made.job_name, made.run_id, made.created) == ("workflow:pair", None, True)
        drain_sync(app)
        again = app.workflows.trigger("pair", payload={"n": 1}, idempotency_key="once")
        assert again.created is False
        [instance] = app.workflows.instances(workflow="pair")
        assert instance.start_run_id == again.run_id
        assert instance.state is InstanceState.SUCCEEDED

        detail = app.workflows.detail(instance.id)
        assert [(s.step, s.map_index, s.state) for s in detail.steps] == [
            ("first", -1, StepState.SUCCEEDED),
            ("each", -1, StepState.SUCCEEDED),
            ("each", 0, StepState.SUCCEEDED),
            ("each", 1, StepState.SUCCEEDED),
        ]
        assert detail.version is not None
        assert detail.version.version == 1
        assert app.workflows.explain(instance.id) == []
