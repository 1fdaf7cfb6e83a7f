"""Connect-time enforcement of the webhook host policy: the aiohttp connector of
:class:`~duetime.targets.http.HttpExecutor`.

The decision is made on the address the socket connects to, not on the URL as written. URL
hosts are read by several parsers (``urllib``, yarl's IDNA/NFKC normalisation, the resolver),
and a check on one parser's reading is bypassed by a spelling another reads differently
(``http://１２７.０.０.１/`` is ``127.0.0.1`` to yarl, and aiohttp skips the resolver for IP
literals). So :class:`GuardedConnector` checks twice, both times on numeric addresses:

1. ``_resolve_host``: every address a connection is about to use, whether it came from the
   resolver (a name; all its addresses must be allowed) or from aiohttp's shortcut for IP
   literals. These are the addresses aiohttp turns into socket addresses: nothing is resolved
   again between this check and ``connect()`` (DNS rebinding).
2. ``socket_factory`` (public aiohttp API since 3.12, handed every address a connection tries,
   one socket per address): the exact socket address given to ``connect()`` must be a numeric
   IP address the policy allows, else no socket is created. This does not depend on which
   private aiohttp method resolved the host, so a change inside aiohttp cannot reopen the
   hole; a refusal here is an ``OSError`` to aiohttp (it tries the next address) and is
   re-raised as :class:`~duetime.targets.http.HostRefused` when the connection fails.

An allow-listed host *name* (``hooks.internal``) may resolve to private addresses: the name
of the connection being made reaches the socket factory through a context variable set in
``_create_direct_connection``. If that ever failed to happen (an aiohttp change), the factory
checks the address as if the name were not listed: stricter, never looser.

Either way a refused address gets no byte: not the TCP handshake, let alone the request.
Imported lazily (with aiohttp) when a worker first sends a request.
"""

from __future__ import annotations

import errno
import inspect
import socket
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from duetime.targets.http import HostPolicy, HostRefused

if "socket_factory" not in inspect.signature(aiohttp.TCPConnector.__init__).parameters:
    raise ImportError(  # fail closed: without the socket-level check, send nothing
        f"duetime's webhook targets need aiohttp>=3.12 (TCPConnector(socket_factory=…)); "
        f"aiohttp {aiohttp.__version__} is installed"
    )


@dataclass(slots=True)
class _Connecting:
    """The connection being made in this task: its URL's host and whether the policy lists it."""

    host: str
    listed: bool
    refusals: list[HostRefused] = field(default_factory=list)


_CONNECTING: ContextVar[_Connecting | None] = ContextVar("duetime_http_connecting", default=None)


class AddressRefused(OSError):
    """Raised by the socket factory (an OSError, so aiohttp and aiohappyeyeballs treat it as a
    failed address); carries the policy's refusal."""

    def __init__(self, refusal: HostRefused) -> None:
        super().__init__(errno.EACCES, str(refusal))
        self.refusal = refusal


class GuardedConnector(aiohttp.TCPConnector):
    """A ``TCPConnector`` that connects only to addresses ``policy`` allows (module docstring).
    Raises :class:`HostRefused` from ``connect`` when it refuses; nothing is sent."""

    def __init__(self, policy: HostPolicy, **kwargs: Any) -> None:
        super().__init__(socket_factory=self._guarded_socket, **kwargs)
        self.policy = policy

    async def _create_direct_connection(self, req: Any, *args: Any, **kwargs: Any) -> Any:
        host = str(req.url.raw_host or "")
        state = _Connecting(host, self.policy.name_listed(host))
        token = _CONNECTING.set(state)
        try:
            return await super()._create_direct_connection(req, *args, **kwargs)
        except HostRefused:
            raise
        except Exception:
            if state.refusals:  # every address refused by the socket factory
                raise state.refusals[0] from None
            raise
        finally:
            _CONNECTING.reset(token)

    async def _resolve_host(self, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        results = await super()._resolve_host(host, port, *args, **kwargs)
        self.policy.check_addresses(host, [str(r["host"]) for r in results])
        return results

    def _guarded_socket(self, addr_info: Any) -> socket.socket:
        family, type_, proto, _, sockaddr = addr_info
        address = str(sockaddr[0])
        state = _CONNECTING.get()
        try:
            self.policy.check_addresses(
                state.host if state is not None else address,
                [address],
                listed=state is not None and state.listed,
            )
        except HostRefused as exc:
            if state is not None:
                state.refusals.append(exc)
            raise AddressRefused(exc) from None
        return socket.socket(family=family, type=type_, proto=proto)


__all__ = ["AddressRefused", "GuardedConnector"]
