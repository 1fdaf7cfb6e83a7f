"""HTTP webhook targets: validating ``{"type": "http", …}`` and executing a run as a request.

A job whose target is ``{"type": "http", "url": …}`` runs under the built-in task name
``duetime.http``; the worker hands such runs to :class:`HttpExecutor`, which sends the run's
payload as JSON through one shared connection pool per worker. Outcomes:

- 2xx: success.
- 408, 429, 5xx, connection errors and timeouts: retryable (``Retry-After`` is honoured).
- other 4xx, and every 3xx (redirects are never followed): permanent, the run goes dead.

Every request is signed (``Duetime-Signature: v1=<hex hmac-sha256(secret, "<ts>.<body>")>``)
with the tenant's secret; ``Idempotency-Key`` is the run id, the same on every attempt.

Where requests may go is decided by :class:`HostPolicy` (``http_allow_hosts``): public
addresses by default, loopback and private ranges only when listed, link-local (cloud metadata)
never. Two places enforce it:

- registration (:func:`validate_target`) refuses hosts that parsers read differently: non-ASCII
  hosts (fullwidth digits and dots, ``。``, circled digits… which IDNA/NFKC turn into other
  hosts, even IP addresses: an internationalized name must be written in its ``xn--`` form),
  number-like IPv4 forms other than a dotted quad (``2130706433``, ``0177.0.0.1``,
  ``0x7f.1``, ``127.1``), link-local addresses, and IPv6 forms carrying a non-public IPv4
  address (``::ffff:127.0.0.1``, ``64:ff9b::7f00:1``, ``2002:7f00:1::``…);
- connect time (``duetime.targets._netguard``): every address a connection uses — each
  address of a name, and IP literals too — is checked, and the socket connects only to checked
  numeric addresses, nothing resolved in between (DNS rebinding). That is the decision that
  counts: it does not depend on how the URL was spelled or parsed.

aiohttp is imported only when a worker first sends a request, so validating targets at
registration stays cheap.
"""

from __future__ import annotations

import email.utils
import hashlib
import hmac
import ipaddress
import math
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from duetime import _json, _tracing
from duetime._types import HTTP_TASK
from duetime.errors import Permanent, RetryLater, ValidationError
from duetime.targets.context import RunContext
from duetime.targets.secrets import (
    is_secret_ref,
    redact_exception,
    resolve_secrets,
    validate_secret_ref,
)

if TYPE_CHECKING:
    import aiohttp

METHODS = ("POST", "PUT", "PATCH", "GET", "DELETE")
DEFAULT_METHOD = "POST"
DEFAULT_TIMEOUT = 30.0
MAX_TIMEOUT = 3600.0
MAX_HEADERS = 50
MAX_URL = 2048
MAX_RETRY_AFTER = 86_400.0
"""A ``Retry-After`` longer than a day is clamped to a day."""
EXCERPT = 200
"""How many characters of a refused response's body go into the error message."""

RESERVED_HEADERS = frozenset(
    {
        "idempotency-key",
        "content-type",
        "content-length",
        "content-encoding",
        "transfer-encoding",
        "host",
        "connection",
        "upgrade",
        "te",
        "trailer",
        "keep-alive",
        "proxy-authorization",
        "proxy-connection",
    }
)
"""Headers a target may not set (``Duetime-*`` is reserved too): duetime sets them, or they
belong to the transport."""

_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_ALLOWED_KEYS = frozenset({"type", "url", "method", "headers", "timeout"})
_LINK_LOCAL = (ipaddress.ip_network("169.254.0.0/16"), ipaddress.ip_network("fe80::/10"))
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
"""Local-use NAT64 (RFC 8215): where the IPv4 address sits depends on the prefix length."""
_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")
_COMPATIBLE = ipaddress.ip_network("::/96")
_HOST_LABEL = re.compile(r"[a-z0-9_-]{1,63}")
_NUMERIC_LABEL = re.compile(r"0x[0-9a-f]*|[0-9]+")
_DOTTED_QUAD = re.compile(r"(?:0|[1-9][0-9]{0,2})(?:\.(?:0|[1-9][0-9]{0,2})){3}")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


# --- validation at registration ---------------------------------------------------------------


def validate_target(target: object) -> dict[str, Any]:
    """Check a target and return it normalized (defaults filled in). Raises ValidationError
    naming the field (``target.url``, ``target.method`` …)."""
    if not isinstance(target, dict):
        raise ValidationError("target", 'must be an object such as {"type": "http", "url": …}')
    kind = target.get("type")
    if kind != "http":
        raise ValidationError(
            "target.type",
            f"unknown target type {kind!r} (known: 'http', 'command', 'workflow', 'redis', "
            "'rabbitmq', 'nats')",
        )
    unknown = sorted(str(k) for k in target if k not in _ALLOWED_KEYS)
    if unknown:
        raise ValidationError(
            f"target.{unknown[0]}",
            f"unknown field (an http target takes {', '.join(sorted(_ALLOWED_KEYS))})",
        )
    url = _validate_url(target.get("url"))
    method = target.get("method", DEFAULT_METHOD)
    if not isinstance(method, str) or method.upper() not in METHODS:
        raise ValidationError("target.method", f"must be one of {', '.join(METHODS)}")
    timeout = target.get("timeout", DEFAULT_TIMEOUT)
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or not 0 < timeout <= MAX_TIMEOUT
    ):
        raise ValidationError(
            "target.timeout", f"must be a number of seconds above 0 and at most {MAX_TIMEOUT:g}"
        )
    return {
        "type": "http",
        "url": url,
        "method": method.upper(),
        "headers": _validate_headers(target.get("headers")),
        "timeout": float(timeout),
    }


def _validate_url(url: object) -> str:
    if not isinstance(url, str) or not url:
        raise ValidationError("target.url", "must be an http:// or https:// URL")
    if len(url) > MAX_URL:
        raise ValidationError("target.url", f"must be at most {MAX_URL} characters")
    if not url.isprintable() or any(c.isspace() for c in url):
        raise ValidationError("target.url", "must not contain spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValidationError("target.url", f"is not a valid URL ({exc})") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise ValidationError(
            "target.url", f"scheme must be http or https, got {parts.scheme or 'none'!r}"
        )
    if not parts.hostname:
        raise ValidationError("target.url", "has no host")
    if parts.username is not None or parts.password is not None:
        raise ValidationError(
            "target.url", "must not carry credentials; send them in target.headers"
        )
    if port == 0:
        raise ValidationError("target.url", "port must be 1-65535")
    _validate_host(url, parts.hostname, bracketed=parts.netloc.rpartition("@")[2][:1] == "[")
    return url


def _validate_host(url: str, host: str, *, bracketed: bool) -> None:
    """Refuse hosts that different parsers read differently, and literal addresses duetime
    never sends to. ``host`` is urllib's reading (lower case, no brackets)."""
    if not host.isascii():
        raise ValidationError("target.url", _non_ascii_reason(url, host))
    address: IPAddress | None
    if bracketed:
        try:
            address = ipaddress.IPv6Address(host)
        except ValueError:
            address = None
        if address is None or "%" in host:
            raise ValidationError(
                "target.url", f"[{host}] is not an IPv6 address (zone ids are not accepted)"
            )
    else:
        labels = (host[:-1] if host.endswith(".") else host).split(".")
        if not all(_HOST_LABEL.fullmatch(label) for label in labels) or len(host) > 253:
            raise ValidationError(
                "target.url",
                f"host {host!r} is not a valid host name: dot-separated labels of letters, "
                "digits, '-' and '_' (an internationalized name goes in its xn-- form)",
            )
        address = None
        if _NUMERIC_LABEL.fullmatch(labels[-1]):  # resolvers read it as an IPv4 address
            if not _DOTTED_QUAD.fullmatch(host) or any(int(p) > 255 for p in labels):
                raise ValidationError(
                    "target.url",
                    f"host {host!r} is a number-like IPv4 form (decimal, octal, hexadecimal, "
                    "shortened or with a trailing dot) that programs read differently; write "
                    "an IPv4 address as four decimal numbers, such as 203.0.113.7",
                )
            address = ipaddress.IPv4Address(host)
    if address is not None:
        if _is_link_local(address):
            raise ValidationError(
                "target.url",
                f"{address} is a link-local address (cloud metadata); duetime never sends there",
            )
        embedded = _embedded_ipv4(address)
        if embedded is not None and not _is_public(embedded):
            raise ValidationError(
                "target.url",
                f"{address} carries the IPv4 address {embedded}, which is not public; write "
                f"{embedded} itself (and list it in DUETIME_HTTP_ALLOW_HOSTS)",
            )
    # Belt and braces: the HTTP client must read the very host that was checked.
    client_host = _client_host(url)
    same = client_host is not None and (
        _literal_ip(client_host) if address is not None else client_host
    ) == (address or host)
    if not same:
        raise ValidationError(
            "target.url",
            f"host {host!r} is read as {client_host!r} by the HTTP client; write it unambiguously",
        )


def _client_host(url: str) -> str | None:
    """The host the HTTP client (aiohttp, through yarl) will connect to; None if unreadable."""
    from yarl import URL  # a dependency of aiohttp; imported here so importing us stays cheap

    try:
        return URL(url).raw_host
    except ValueError:
        return None


def _non_ascii_reason(url: str, host: str) -> str:
    normalized = _client_host(url)
    if normalized is not None and normalized.isascii():
        last = normalized.rstrip(".").rpartition(".")[2]
        if _literal_ip(normalized) is not None or _NUMERIC_LABEL.fullmatch(last):
            return (
                f"host {host!r} has non-ASCII characters that read as the address "
                f"{normalized}; duetime refuses such hosts: write hosts in ASCII"
            )
        return (
            f"host {host!r} has non-ASCII characters; write the host in ASCII (an "
            f"internationalized name in its punycode, xn--, form): {normalized!r}"
        )
    return (
        f"host {host!r} has non-ASCII characters; write the host in ASCII (an "
        "internationalized name in its punycode, xn--, form)"
    )


def _validate_headers(headers: object) -> dict[str, Any]:
    if headers is None:
        return {}
    if not isinstance(headers, dict):
        raise ValidationError("target.headers", "must be an object of header names to strings")
    if len(headers) > MAX_HEADERS:
        raise ValidationError("target.headers", f"at most {MAX_HEADERS} headers")
    seen: set[str] = set()
    for name, value in headers.items():
        if not isinstance(name, str) or not _TOKEN.match(name):
            raise ValidationError("target.headers", f"{name!r} is not a valid header name")
        lower = name.lower()
        if lower in RESERVED_HEADERS or lower.startswith("duetime-"):
            raise ValidationError(
                "target.headers", f"{name!r} is reserved: duetime sets it (or the transport)"
            )
        if lower in seen:
            raise ValidationError("target.headers", f"{name!r} is given twice")
        seen.add(lower)
        if is_secret_ref(value):  # resolved by the worker at send time (targets/secrets.py)
            validate_secret_ref(f"target.headers.{name}", value)
            continue
        if not isinstance(value, str):
            raise ValidationError(
                "target.headers", f'the value of {name!r} must be a string or {{"secret": NAME}}'
            )
        if len(value) > 8192 or any(c in value for c in "\r\n\0"):
            raise ValidationError(
                "target.headers",
                f"the value of {name!r} must be at most 8192 characters with no line breaks",
            )
    return dict(headers)


# --- the host allow-list ----------------------------------------------------------------------


def _literal_ip(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


def _unwrap(address: IPAddress) -> IPAddress:
    """The IPv4 address inside an IPv4-mapped or NAT64 IPv6 address, else the address: the
    forms that reach that IPv4 address (through the dual-stack socket or a NAT64 gateway)."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def _embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries: IPv4-mapped (``::ffff:a.b.c.d``),
    IPv4-translated (``::ffff:0:a.b.c.d``), IPv4-compatible (``::a.b.c.d``), NAT64
    (``64:ff9b::/96``), 6to4 (``2002::/16``) or Teredo (the client); else None."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    low = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64 or address in _TRANSLATED:
        return low
    if address in _COMPATIBLE and int(address) > 1:  # not :: or ::1
        return low
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    return None


def _is_link_local(address: IPAddress) -> bool:
    embedded = _embedded_ipv4(address)
    return any(
        a.version == n.version and a in n
        for a in (address, embedded)
        if a is not None
        for n in _LINK_LOCAL
    )


def _is_public(address: IPAddress) -> bool:
    plain = _unwrap(address)
    if not plain.is_global or plain.is_multicast:
        return False
    if plain is address and isinstance(address, ipaddress.IPv6Address):
        if address in _NAT64_LOCAL:
            return False
        embedded = _embedded_ipv4(address)  # 6to4, Teredo, IPv4-compatible …
        if embedded is not None and (not embedded.is_global or embedded.is_multicast):
            return False
    return True


class HostRefused(Permanent):
    """The allow-list refuses the URL's host (or one of its addresses): nothing was sent."""


@dataclass(frozen=True, slots=True)
class HostPolicy:
    """Where webhook requests may go, from ``http_allow_hosts`` (comma-separated).

    Entries: IP addresses or CIDR ranges (``127.0.0.1``, ``10.0.0.0/8``), host names
    (``hooks.internal``, or ``*.internal`` for its subdomains) and ``public``. Empty means
    ``public``: any public address. With entries, only what they list is allowed (add
    ``public`` to keep public addresses allowed too). A listed host name may resolve to any
    address but link-local; other names must resolve to listed or (with ``public``) public
    addresses only. Link-local addresses (169.254.0.0/16, fe80::/10 — cloud metadata) are
    refused whatever is listed.
    """

    networks: tuple[IPNetwork, ...] = ()
    names: tuple[str, ...] = ()
    public: bool = True

    @classmethod
    def parse(cls, text: str | Iterable[str] | None) -> HostPolicy:
        entries = text.split(",") if isinstance(text, str) else list(text or ())
        entries = [e.strip() for e in entries if e and e.strip()]
        if not entries:
            return cls()
        networks: list[IPNetwork] = []
        names: list[str] = []
        public = False
        for entry in entries:
            if entry.lower() == "public":
                public = True
                continue
            try:
                networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
                continue
            except ValueError:
                pass
            name = entry.lower().rstrip(".")
            bare = name[2:] if name.startswith("*.") else name
            if not bare or not all(re.fullmatch(r"[a-z0-9_-]{1,63}", p) for p in bare.split(".")):
                raise ValidationError(
                    "http_allow_hosts",
                    f"{entry!r} is not an IP address, CIDR range, host name or 'public'",
                )
            names.append(name)
        return cls(tuple(networks), tuple(names), public)

    def name_listed(self, host: str) -> bool:
        """Whether ``host`` is a listed name (an IP address never is: see the networks)."""
        if _literal_ip(host) is not None:
            return False
        host = host.lower().rstrip(".")
        for name in self.names:
            if name.startswith("*."):
                if host.endswith(name[1:]) and host != name[2:]:
                    return True
            elif host == name:
                return True
        return False

    def refusal(self, address: IPAddress, *, name_listed: bool = False) -> str | None:
        """Why ``address`` is refused, or None when requests may go there."""
        if _is_link_local(address):
            return f"{address} is link-local (cloud metadata); never allowed"
        if name_listed:
            return None
        plain = _unwrap(address)
        if any(plain.version == n.version and plain in n for n in self.networks):
            return None
        if self.public and _is_public(address):
            return None
        if self.public:
            return (
                f"{address} is not a public address; list it in http_allow_hosts "
                "(DUETIME_HTTP_ALLOW_HOSTS) to allow it"
            )
        return f"{address} is not in http_allow_hosts (DUETIME_HTTP_ALLOW_HOSTS)"

    def check_addresses(
        self, host: str, addresses: Iterable[str], *, listed: bool | None = None
    ) -> None:
        """Raise HostRefused unless every address ``host`` resolved to is allowed (each must be
        a numeric IP address). ``listed``: whether ``host`` is a listed name (looked up if
        None)."""
        if listed is None:
            listed = self.name_listed(host)
        for text in addresses:
            address = _literal_ip(text)
            if address is None:  # connecting to it would resolve it again, unchecked
                raise HostRefused(
                    f"refused to send to {host}: {text!r} is not a numeric IP address"
                )
            reason = self.refusal(address, name_listed=listed)
            if reason is not None:
                raise HostRefused(f"refused to send to {host}: {reason}")


# --- execution --------------------------------------------------------------------------------


class WebhookFailed(Exception):
    """A retryable failure: 408, 429 or 5xx without ``Retry-After``, a connection error.
    ``http_status`` is the response's status (None for a connection error); a job's
    ``retry_on_status`` / ``permanent_on_status`` classify by it (policies/retry_rules.py)."""

    http_status: int | None = None


class WebhookTimeout(TimeoutError):
    """The request did not complete within the target's timeout (retryable)."""


class WebhookRetryLater(RetryLater):
    """A retryable status with ``Retry-After``: retried after that delay."""

    http_status: int | None = None


class WebhookRejected(Permanent):
    """A 3xx (redirects are not followed) or a 4xx other than 408/429: the run goes dead
    (unless the job's ``retry_on_status`` lists its ``http_status``)."""

    http_status: int | None = None


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The ``Duetime-Signature`` header value: ``v1=<hex hmac-sha256(secret, "<ts>.<body>")>``."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"v1={mac.hexdigest()}"


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds from a ``Retry-After`` value (delta-seconds or an HTTP date), clamped to
    0..MAX_RETRY_AFTER; None when absent or unreadable."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    if value.isdigit():
        return min(float(value), MAX_RETRY_AFTER)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    delta = (when - (now or datetime.now(UTC))).total_seconds()
    return min(max(delta, 0.0), MAX_RETRY_AFTER)


def _instant(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _where(method: str, url: str) -> str:
    """``POST https://host/path`` for messages: no query string or fragment (may hold secrets)."""
    parts = urlsplit(url)
    return f"{method} {parts.scheme}://{parts.netloc}{parts.path or '/'}"


def _excerpt(body: bytes) -> str:
    text = body.decode("utf-8", errors="replace").strip()
    text = " ".join(text.split())
    return text[:EXCERPT] + ("…" if len(text) > EXCERPT else "")


def _user_agent() -> str:
    try:
        return f"duetime/{metadata.version('duetime')}"
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "duetime"


SecretLookup = Callable[[str], Awaitable[str | Sequence[str]]]
"""A tenant's signing secret, or its secrets (the current first, then one still in a rotation's
overlap window)."""

SECRET_CACHE_TTL = 10.0
"""Seconds a worker keeps a tenant's signing secrets before reading them again: a rotation
reaches every worker within this (its overlap window must be longer: at least a minute)."""


def sign_all(secrets: str | Sequence[str], timestamp: int, body: bytes) -> str:
    """The ``Duetime-Signature`` value for one or several secrets: ``v1=<hex>`` per secret,
    comma-separated, the current secret's first (docs/webhooks.md, "Rotating the signing
    secret")."""
    if isinstance(secrets, str):
        return sign(secrets, timestamp, body)
    return ",".join(sign(secret, timestamp, body) for secret in secrets)


class HttpExecutor:
    """Sends runs with HTTP targets. One per worker: one connection pool (at least
    ``concurrency`` connections), the tenants' secrets cached. Use from one event loop;
    :meth:`close` when the worker stops."""

    def __init__(
        self,
        *,
        secret_for: SecretLookup,
        policy: HostPolicy,
        concurrency: int = 10,
        resolver: Any = None,
    ) -> None:
        """``resolver``: an aiohttp resolver (``resolve(host, port, family)``); the default is
        aiohttp's. Whatever it answers, the policy checks each address before connecting."""
        self.secret_for = secret_for
        self.policy = policy
        self.limit = max(concurrency, 1)
        self.resolver = resolver
        self._session: aiohttp.ClientSession | None = None
        self._secrets: dict[str, tuple[float, str | Sequence[str]]] = {}
        """Tenant → (when read, ``time.monotonic``; its signing secrets)."""
        self._user_agent = _user_agent()

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            import aiohttp

            from duetime.targets._netguard import GuardedConnector

            connector = GuardedConnector(
                self.policy, limit=self.limit, limit_per_host=0, resolver=self.resolver
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                trust_env=False,  # a proxy would connect where the allow-list cannot see
                auto_decompress=True,
                headers={"User-Agent": self._user_agent},
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    async def _secret(self, tenant: str) -> str | Sequence[str]:
        now = time.monotonic()
        cached = self._secrets.get(tenant)
        if cached is not None and now - cached[0] < SECRET_CACHE_TTL:
            return cached[1]
        secrets = await self.secret_for(tenant)
        self._secrets[tenant] = (now, secrets)
        return secrets

    async def execute(self, ctx: RunContext, target: dict[str, Any]) -> None:
        """Send one attempt of a run. Returns on 2xx; raises WebhookFailed, WebhookTimeout or
        WebhookRetryLater (retryable), WebhookRejected or HostRefused (permanent). Secret
        references in its headers are resolved now; their values never appear in errors."""
        try:
            target = validate_target(target)
        except ValidationError as exc:
            raise WebhookRejected(f"the run's target is not valid: {exc}") from None
        url = str(target["url"])
        method = str(target.get("method", DEFAULT_METHOD))
        timeout = float(target.get("timeout", DEFAULT_TIMEOUT))
        where = _where(method, url)
        parts = urlsplit(url)
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise WebhookRejected(f"{where}: not an http(s) URL")
        # Where the request may go is decided when connecting, on the addresses connected to
        # (IP literals included): the GuardedConnector raises HostRefused, nothing sent.

        body = _json.dumps(ctx.payload).encode()
        timestamp = int(time.time())
        resolved = resolve_secrets(dict(target.get("headers") or {}))  # never stored resolved
        headers = dict(resolved.value)
        for name, value in headers.items():
            if any(c in value for c in "\r\n\0"):
                raise WebhookRejected(f"the secret of header {name!r} holds a line break or NUL")
        headers.update(
            {
                "Content-Type": "application/json",
                "Idempotency-Key": str(ctx.run_id),
                "Duetime-Run-Id": str(ctx.run_id),
                "Duetime-Fencing-Token": str(ctx.token),
                "Duetime-Scheduled-For": _instant(ctx.scheduled_for),
                "Duetime-Attempt": str(ctx.attempt),
                "Duetime-Timestamp": str(timestamp),
                "Duetime-Signature": sign_all(await self._secret(ctx.tenant), timestamp, body),
            }
        )
        if (parent := _tracing.traceparent()) is not None:  # W3C trace context, tracing on
            headers["traceparent"] = parent
        try:
            await self._send(method, url, body, headers, timeout)
        except BaseException as exc:  # a response may echo a header back: no secret in errors
            redact_exception(exc, resolved.secrets)
            raise

    async def _send(
        self, method: str, url: str, body: bytes, headers: dict[str, str], timeout: float
    ) -> None:
        import aiohttp

        where = _where(method, url)
        session = self._get_session()
        try:
            async with session.request(
                method,
                url,
                data=body,
                headers=headers,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=timeout),
            ) as response:
                status = response.status
                if 200 <= status < 300:
                    await response.read()  # so the connection goes back to the pool
                    return
                excerpt = _excerpt(await response.content.read(EXCERPT * 4))
                retry_after = response.headers.get("Retry-After")
                location = response.headers.get("Location")
        except HostRefused:
            raise
        except TimeoutError:
            raise WebhookTimeout(f"{where} timed out after {timeout:g}s") from None
        except aiohttp.ClientError as exc:
            refused = _refusal_in(exc)
            if refused is not None:
                raise refused from None
            raise WebhookFailed(f"{where} failed: {type(exc).__name__}: {exc}") from None
        _raise_for_status(where, status, excerpt, retry_after, location)

    async def __aenter__(self) -> HttpExecutor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _refusal_in(exc: BaseException) -> HostRefused | None:
    """The HostRefused raised by the connector's checks, if aiohttp wrapped it in a connection
    error (the socket factory's refusal is an OSError carrying it as ``refusal``)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        for candidate in (current, getattr(current, "os_error", None)):
            if isinstance(candidate, HostRefused):
                return candidate
            refusal = getattr(candidate, "refusal", None)
            if isinstance(refusal, HostRefused):
                return refusal
        current = current.__cause__ or current.__context__
    return None


def _raise_for_status(
    where: str, status: int, excerpt: str, retry_after: str | None, location: str | None
) -> None:
    """Raise the failure a non-2xx ``status`` is, carrying it as ``http_status``."""
    failure = _status_failure(where, status, excerpt, retry_after, location)
    failure.http_status = status
    raise failure


def _status_failure(
    where: str, status: int, excerpt: str, retry_after: str | None, location: str | None
) -> WebhookFailed | WebhookRetryLater | WebhookRejected:
    detail = f"{where} returned {status}" + (f": {excerpt}" if excerpt else "")
    if status == 408 or status == 429 or status >= 500:
        delay = retry_after_seconds(retry_after)
        if delay is not None:
            return WebhookRetryLater(f"{detail} (Retry-After {delay:g}s)", delay=delay)
        return WebhookFailed(detail)
    if 300 <= status < 400:
        moved = ""
        if location:  # without its query string, which may carry a token
            parts = urlsplit(location[:MAX_URL])
            moved = f" to {parts.scheme + '://' if parts.scheme else ''}{parts.netloc}{parts.path}"
            moved = moved[: EXCERPT + 4]
        return WebhookRejected(
            f"{where} returned {status} (a redirect{moved}); redirects are not followed: "
            "point the target at the final URL"
        )
    return WebhookRejected(detail)


__all__ = [
    "HTTP_TASK",
    "HostPolicy",
    "HostRefused",
    "HttpExecutor",
    "WebhookFailed",
    "WebhookRejected",
    "WebhookRetryLater",
    "WebhookTimeout",
    "retry_after_seconds",
    "sign",
    "sign_all",
    "validate_target",
]
