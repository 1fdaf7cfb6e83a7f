"""``app.outbox``: the broker outbox of the app's tenant (docs/brokers.md): its dead messages
(refused by the broker for good), their replay, and the outbox's depth."""

from __future__ import annotations

from collections.abc import Sequence

from duetime._outbox import OutboxDepth, OutboxRow
from duetime.app._service import Service, check_limit
from duetime.app.audit import audited
from duetime.errors import ValidationError


class Outbox(Service):
    """Dead broker messages stay until replayed: a replay puts them back in the outbox, due at
    once, and the relays publish them again (with the same message id)."""

    __slots__ = ()

    async def dead(self, *, limit: int = 100, after: int | None = None) -> list[OutboxRow]:
        """The tenant's dead messages, oldest first; ``after``: the last id of a previous
        page."""
        check_limit(limit)
        if after is not None and (isinstance(after, bool) or not isinstance(after, int)):
            raise ValidationError("after", "must be a message's outbox id (an integer)")
        return await self.store.outbox_dead_list(self.tenant, limit=limit, after_id=after)

    async def replay(self, ids: Sequence[int] | None = None) -> int:
        """Put dead messages back for publishing: ``ids`` (outbox ids), or all of the tenant's
        when None. Returns how many (ids that are not the tenant's dead messages are left
        out)."""
        if ids is not None:
            ids = list(ids)
            if not ids or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
                raise ValidationError("ids", "must be a non-empty list of outbox ids (integers)")
        with audited(self, "replayed", "outbox"):
            return await self.store.outbox_replay(self.tenant, ids)

    async def depth(self) -> OutboxDepth:
        """Unpublished messages (every tenant's), the oldest one's creation, dead messages."""
        return await self.store.outbox_depth()
