"""The faults of the failover test and bench, injected into a running :class:`HaCluster`.

:class:`Faults` stands where the chaos harness (chaos/harness.py) would restart PostgreSQL:
each ``restart`` call injects the next scenario of its list and returns once the cluster is
whole again (a primary with a streaming synchronous standby), so the outage the chaos checks
allow for runs from the fault to that instant. Scenarios:

- ``kill-primary``: SIGKILL the primary's PostgreSQL and Patroni together; the standby is
  promoted once the leader lease expires; the killed node is then started again (cloned
  afresh) and becomes the new synchronous standby. In strict synchronous mode with two nodes,
  commits wait from the kill until that standby streams.
- ``kill-standby``: SIGKILL the synchronous standby's PostgreSQL and Patroni; commits on the
  primary wait (strict mode: no standby, no commit) for ``standby_down`` seconds, then the
  standby is started again with its data and catches up.
- ``freeze-primary``: SIGSTOP the primary's PostgreSQL and Patroni together (a machine that
  stops answering without closing a connection); once the standby is promoted, SIGCONT them:
  Patroni demotes the old primary (and reinitialises it if it cannot follow).

With an ``api`` (:class:`tests.failover.api.ApiProbe`), a trigger goes through the REST API
before each fault, every half second during it, and after it until one is served.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tests.failover.api import ApiProbe
from tests.failover.ha import HaCluster

SCENARIOS = ("kill-primary", "kill-standby", "freeze-primary")


@dataclass
class Fault:
    """What one injected fault did, as ``time.time()`` instants."""

    scenario: str
    victim: str
    began: float
    promoted: float | None
    """When the other node was first seen as the primary (None: no failover)."""
    whole: float
    """When the cluster had a primary and a streaming synchronous standby again."""


@dataclass
class Faults:
    """Inject ``scenarios`` in turn, one per :meth:`restart` (the chaos harness's call)."""

    cluster: HaCluster
    scenarios: tuple[str, ...]
    standby_down: float = 5.0
    say: Callable[[str], None] = print
    api: ApiProbe | None = None
    done: list[Fault] = field(default_factory=list)

    def __post_init__(self) -> None:
        unknown = [s for s in self.scenarios if s not in SCENARIOS]
        if unknown:
            raise ValueError(f"unknown scenario(s) {unknown}; known: {', '.join(SCENARIOS)}")

    def describe(self) -> str:
        return f"faults of a Patroni cluster: {', '.join(self.scenarios)}"

    def restart(self, base_url: str, mode: str) -> tuple[float, float]:
        """Inject the next scenario; (began, whole). ``base_url`` and ``mode`` (the chaos
        harness's) are not used: the cluster is the target."""
        scenario = self.scenarios[len(self.done) % len(self.scenarios)]
        number = len(self.done) + 1
        cluster = self.cluster
        primary = cluster.wait_ready()
        standby = next(name for name in cluster.nodes if name != primary)
        if self.api is not None:
            self.api.before(number)
        with self.api.during(number) if self.api is not None else contextlib.nullcontext():
            victim, began, promoted = self._inject(scenario, primary, standby)
        whole = time.time()
        if self.api is not None:
            self.api.after(number, whole)
        fault = Fault(scenario, victim, began, promoted, whole)
        self.done.append(fault)
        promotion = "" if promoted is None else f", promoted after {promoted - began:.1f}s"
        self.say(
            f"failover: {scenario} of {victim}{promotion}, whole again after "
            f"{fault.whole - began:.1f}s"
        )
        return began, fault.whole

    def _inject(self, scenario: str, primary: str, standby: str) -> tuple[str, float, float | None]:
        """Inject ``scenario``; return once the cluster is whole: (victim, began, promoted)."""
        cluster = self.cluster
        began = time.time()
        promoted: float | None = None
        if scenario == "kill-primary":
            victim = primary
            cluster.kill_node(primary)
            promoted = cluster.wait_primary(standby)
            cluster.restart_node(primary, wipe=True)
            cluster.heal()
        elif scenario == "kill-standby":
            victim = standby
            cluster.kill_node(standby)
            time.sleep(self.standby_down)  # the outage itself: commits wait meanwhile
            cluster.restart_node(standby, wipe=False)
            cluster.heal()
        else:
            victim = primary
            cluster.freeze_node(primary)
            try:
                promoted = cluster.wait_primary(standby)
            finally:
                cluster.thaw_node(primary)
            cluster.heal()
        return victim, began, promoted

    def ensure_running(self, base_url: str) -> bool:
        """Whether the cluster is whole (healing it if it can); the harness's last look."""
        try:
            self.cluster.heal(patience=10.0, timeout=60.0)
        except RuntimeError:
            return False
        return True
