"""Node presence: every duetime process registers itself (roles, partitions) and heartbeats,
so ``duetime nodes`` can say what runs where. A clean stop removes the node's row."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Sequence

from duetime._aio import wait_or_stop
from duetime._types import NodeInfo
from duetime.store.base import Store

log = logging.getLogger("duetime.nodes")


def new_node_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class NodePresence:
    def __init__(
        self,
        store: Store,
        node_id: str,
        roles: Sequence[str],
        *,
        interval: float,
        partitions: str | None = None,
    ) -> None:
        self.store = store
        self.node_id = node_id
        self.roles = tuple(roles)
        self.interval = interval
        self.partitions = partitions

    async def register(self) -> None:
        # the worker's _register has this shape on purpose: a node and a worker are other records
        now = await self.store.db_now()
        await self.store.node_register(
            NodeInfo(
                id=self.node_id,
                host=socket.gethostname(),
                pid=os.getpid(),
                roles=self.roles,
                partitions=self.partitions,
                started_at=now,
                heartbeat_at=now,
            )
        )

    async def run(self, stop: asyncio.Event) -> None:
        """Register, then heartbeat by registering again (an upsert that keeps ``started_at``,
        so a node pruned during a long outage reappears)."""
        while not stop.is_set():
            try:
                await self.register()
            except self.store.transient_errors as exc:  # an outage: a line, not a traceback
                log.warning("node heartbeat: database unreachable (%s); retrying", exc)
            except Exception:
                log.exception("node heartbeat failed; retrying")
            await wait_or_stop(stop, self.interval)
        try:
            await self.store.node_unregister(self.node_id)
        except Exception:
            log.exception("could not remove node %s; the leader prunes it later", self.node_id)
