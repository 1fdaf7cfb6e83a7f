"""Round trips to PostgreSQL counted on the wire: a TCP relay between a store and the server
that reads the client's side of the protocol (no mock: the store, psycopg and libpq are the real
ones, only their bytes pass through here).

Outside pipeline mode each client message that asks for an answer before the client goes on is
a round trip: a simple ``Query`` (``BEGIN``, ``COMMIT``, the pool's empty ping) or the ``Sync``
that ends an extended-protocol statement (``Parse``/``Bind``/``Execute``)."""

from __future__ import annotations

import asyncio
import contextlib
import struct
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from duetime.store import Store, create_store

_UNTYPED_REQUESTS = {80877103, 80877104}
"""SSLRequest and GSSENCRequest: the server answers one byte, then a startup message follows."""


@dataclass
class Wire:
    """What the clients sent, one entry per round trip: the text of a simple query, or of the
    statements parsed since the last ``Sync`` (``"<prepared>"`` for one executed by name)."""

    rounds: list[str] = field(default_factory=list)

    def statements(self) -> list[str]:
        """The round trips but the pool's empty pings (a connection idle for a second is
        pinged before use: not the store's statement)."""
        return [r for r in self.rounds if r.strip()]


async def _client_to_server(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, wire: Wire
) -> None:
    head = await reader.readexactly(8)
    while struct.unpack("!ii", head)[1] in _UNTYPED_REQUESTS:
        writer.write(head)
        await writer.drain()
        head = await reader.readexactly(8)
    (length,) = struct.unpack("!i", head[:4])
    writer.write(head + await reader.readexactly(length - 8))  # the startup message
    parsed: list[str] = []
    while True:
        kind = await reader.readexactly(1)
        size = await reader.readexactly(4)
        body = await reader.readexactly(struct.unpack("!i", size)[0] - 4)
        if kind == b"Q":
            wire.rounds.append(body.rstrip(b"\0").decode())
        elif kind == b"P":
            parsed.append(body.split(b"\0")[1].decode())
        elif kind == b"S":
            wire.rounds.append("\n;\n".join(parsed) or "<prepared>")
            parsed = []
        writer.write(kind + size + body)
        await writer.drain()
        if kind == b"X":
            return


async def _server_to_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while chunk := await reader.read(65536):
        writer.write(chunk)
        await writer.drain()


@contextlib.asynccontextmanager
async def counted(url: str) -> AsyncIterator[tuple[str, Wire]]:
    """``url`` rewritten to reach its server through a counting relay (on a port the OS picks;
    TLS and GSS encryption off, so the protocol can be read), and what the relay records."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 5432
    wire = Wire()
    tasks: set[asyncio.Task[None]] = set()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(host, port)
        both = [
            asyncio.create_task(_client_to_server(reader, up_writer, wire)),
            asyncio.create_task(_server_to_client(up_reader, writer)),
        ]
        tasks.update(both)
        with contextlib.suppress(Exception):
            await asyncio.wait(both, return_when=asyncio.FIRST_COMPLETED)
        for task in both:
            task.cancel()
        for w in (writer, up_writer):
            w.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    relay_port = server.sockets[0].getsockname()[1]
    query = dict(parse_qsl(parts.query)) | {"sslmode": "disable", "gssencmode": "disable"}
    user = parts.netloc.rpartition("@")[0]
    netloc = f"{user}@127.0.0.1:{relay_port}" if user else f"127.0.0.1:{relay_port}"
    try:
        yield urlunsplit(parts._replace(netloc=netloc, query=urlencode(query))), wire
    finally:
        server.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@contextlib.asynccontextmanager
async def counted_store(url: str) -> AsyncIterator[tuple[Store, Wire]]:
    """A migrated store on ``url`` (the database clock: no test clock) whose every round trip
    passes through :func:`counted`'s relay, and what the relay records."""
    async with counted(url) as (relayed, wire):
        store = create_store(relayed)
        await store.open()
        try:
            await store.migrate()
            yield store, wire
        finally:
            await store.close()
