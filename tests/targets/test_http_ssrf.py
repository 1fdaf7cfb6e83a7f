"""The webhook SSRF guard (issue 13): hosts spelled so that parsers disagree (Unicode digits and
dots, number-like IPv4 forms, IPv4 carried in IPv6), names resolving to refused ranges, and DNS
rebinding.

Two layers are tested separately: registration (``validate_target``: a field error, 422 at the
API) and connect time (``HttpExecutor``'s connector: the address the socket connects to).

Nothing here may leave the machine. Listeners are on loopback only; names are answered by
:class:`TableResolver`, never by real DNS; and the ``connects`` fixture sees every ``connect()``
the event loop makes, failing the test on one to a non-loopback address. Where a test needs an
"allowed" address it uses 127.0.0.2 with an allow-list naming it, not a public one.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest

import duetime.targets.http as http_target
from duetime import ValidationError
from duetime.api import create_api
from duetime.app import AsyncApp
from duetime.errors import Permanent
from duetime.targets._netguard import GuardedConnector
from duetime.targets.context import RunContext
from duetime.targets.http import (
    HTTP_TASK,
    HostPolicy,
    HostRefused,
    HttpExecutor,
    WebhookFailed,
    WebhookRejected,
    validate_target,
)
from tests.targets.receiver import Receiver, Reply

# --- helpers -----------------------------------------------------------------------------------


class TableResolver:
    """An aiohttp resolver answering from a table, never from DNS: ``answers[name]`` is a list
    of answers, one per lookup (the last repeats). With ``like_the_os``, number-like IPv4 names
    (``0x7f.1``, ``2130706433``) are read the way the C library does (``inet_aton``). Other
    names fail as unknown."""

    def __init__(self, answers: dict[str, list[list[str]]], *, like_the_os: bool = False) -> None:
        self.answers = {name: list(seq) for name, seq in answers.items()}
        self.like_the_os = like_the_os
        self.calls: list[str] = []

    async def resolve(
        self, host: str, port: int = 0, family: int = socket.AF_INET
    ) -> list[dict[str, Any]]:
        self.calls.append(host)
        answers = self.answers.get(host)
        if answers is not None:
            addresses = answers.pop(0) if len(answers) > 1 else answers[0]
        elif self.like_the_os:
            try:
                addresses = [socket.inet_ntoa(socket.inet_aton(host))]
            except OSError:
                raise OSError(socket.EAI_NONAME, f"{host}: unknown (test resolver)") from None
        else:
            raise OSError(socket.EAI_NONAME, f"{host}: unknown (test resolver)")
        return [
            {
                "hostname": host,
                "host": address,
                "port": port,
                "family": socket.AF_INET6 if ":" in address else socket.AF_INET,
                "proto": 0,
                "flags": socket.AI_NUMERICHOST,
            }
            for address in addresses
        ]

    async def close(self) -> None:
        pass


class LeftTheMachine(AssertionError):
    """A test tried to connect somewhere other than loopback."""


@pytest.fixture
async def connects(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every address the event loop connects a socket to, in order. A non-loopback address
    fails the test before any packet is sent."""
    loop = asyncio.get_running_loop()
    seen: list[tuple[str, int]] = []
    original = loop.sock_connect

    async def sock_connect(sock: socket.socket, address: Any) -> None:
        host, port = str(address[0]), int(address[1])
        if not ipaddress.ip_address(host.split("%", 1)[0]).is_loopback:
            raise LeftTheMachine(f"a test tried to connect to {address!r}")
        seen.append((host, port))
        await original(sock, address)

    monkeypatch.setattr(loop, "sock_connect", sock_connect)
    return seen


async def _secret(tenant: str) -> str:
    return "s3cret"


def executor(allow: str = "", resolver: TableResolver | None = None) -> HttpExecutor:
    return HttpExecutor(
        secret_for=_secret,
        policy=HostPolicy.parse(allow),
        resolver=resolver or TableResolver({}),  # never the system's resolver
    )


def context() -> RunContext:
    return RunContext(
        run_id=uuid.uuid4(),
        job_id=uuid.uuid4(),
        job_name="hook",
        tenant="default",
        task=HTTP_TASK,
        scheduled_for=datetime.now(UTC),
        attempt=1,
        max_attempts=3,
        token=1,
        worker_id="worker-1",
        payload={"n": 1},
    )


async def send(http: HttpExecutor, url: str) -> None:
    try:
        await http.execute(context(), {"type": "http", "url": url, "timeout": 5})
    finally:
        await http.close()


@pytest.fixture
def unchecked_targets(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let targets reach the executor without registration's checks, as a row written before
    them (or by a bug) would: only the connect-time guard stands."""

    def lenient(target: Any) -> dict[str, Any]:
        return {"method": "POST", "headers": {}, "timeout": 5.0, **target}

    monkeypatch.setattr(http_target, "validate_target", lenient)


def url_error(url: str) -> str:
    with pytest.raises(ValidationError) as caught:
        validate_target({"type": "http", "url": url})
    assert caught.value.field == "target.url"
    return caught.value.reason


# --- the family of spellings -------------------------------------------------------------------

UNICODE_LOOPBACK = [
    pytest.param("１２７.０.０.１", id="fullwidth-digits"),
    pytest.param("１２７．０．０．１", id="fullwidth-digits-and-dots"),
    pytest.param("127。0。0。1", id="ideographic-full-stops"),
    pytest.param("127｡0｡0｡1", id="halfwidth-ideographic-full-stops"),
    pytest.param("127．0．0．1", id="fullwidth-full-stops"),
    pytest.param("①②⑦.⓪.⓪.①", id="circled-digits"),
    pytest.param("𝟏𝟐𝟕.𝟎.𝟎.𝟏", id="mathematical-bold-digits"),
    pytest.param("𝟙𝟚𝟟.𝟘.𝟘.𝟙", id="mathematical-double-struck-digits"),
    pytest.param("ｌｏｃａｌｈｏｓｔ", id="fullwidth-localhost"),
]
"""Hosts the HTTP client (yarl: IDNA/NFKC) reads as 127.0.0.1 or localhost."""

UNICODE_OTHER = [
    pytest.param("١٢٧.٠.٠.١", id="arabic-indic-digits"),
    pytest.param("۱۲۷.۰.۰.۱", id="extended-arabic-indic-digits"),
    pytest.param("१२७.०.०.१", id="devanagari-digits"),
    pytest.param("１６９.２５４.１６９.２５４", id="fullwidth-metadata"),
    pytest.param("169。254。169。254", id="ideographic-metadata"),
    pytest.param("bücher.example", id="idn"),
]

NUMERIC_FORMS = [
    pytest.param("2130706433", id="decimal"),
    pytest.param("0x7f000001", id="hex-whole"),
    pytest.param("0177.0.0.1", id="octal"),
    pytest.param("0x7f.1", id="hex-short"),
    pytest.param("0x7f.0.0.1", id="hex-octet"),
    pytest.param("127.1", id="short-2"),
    pytest.param("127.0.1", id="short-3"),
    pytest.param("017700000001", id="octal-whole"),
    pytest.param("127.000.0.1", id="zero-padded"),
    pytest.param("127.0.0.1.", id="trailing-dot"),
    pytest.param("256.0.0.1", id="octet-over-255"),
    pytest.param("1.2.3.4.5", id="five-parts"),
    pytest.param("2852039166", id="decimal-metadata"),
]

EMBEDDED_IPV6 = [
    pytest.param("::ffff:127.0.0.1", "127.0.0.1", id="ipv4-mapped"),
    pytest.param("::ffff:7f00:1", "127.0.0.1", id="ipv4-mapped-hex"),
    pytest.param("::ffff:0:127.0.0.1", "127.0.0.1", id="ipv4-translated"),
    pytest.param("::127.0.0.1", "127.0.0.1", id="ipv4-compatible"),
    pytest.param("64:ff9b::7f00:1", "127.0.0.1", id="nat64"),
    pytest.param("64:ff9b::a00:1", "10.0.0.1", id="nat64-private"),
    pytest.param("2002:7f00:1::", "127.0.0.1", id="6to4"),
    pytest.param("2002:c0a8:101::1", "192.168.1.1", id="6to4-private"),
    pytest.param("2001:0:4136:e378:8000:63bf:80ff:fffe", "127.0.0.1", id="teredo"),
]

EMBEDDED_LINK_LOCAL = [
    pytest.param("::ffff:169.254.169.254", id="ipv4-mapped"),
    pytest.param("::169.254.169.254", id="ipv4-compatible"),
    pytest.param("64:ff9b::a9fe:a9fe", id="nat64"),
    pytest.param("2002:a9fe:a9fe::", id="6to4"),
    pytest.param("fe80::1%25eth0", id="zone-id"),
]


# --- registration ------------------------------------------------------------------------------


@pytest.mark.parametrize("host", UNICODE_LOOPBACK)
def test_unicode_hosts_reading_as_loopback_are_refused_at_registration(host: str) -> None:
    reason = url_error(f"http://{host}:18080/x")
    assert "non-ASCII" in reason
    assert "127.0.0.1" in reason or "localhost" in reason


@pytest.mark.parametrize("host", UNICODE_OTHER)
def test_every_non_ascii_host_is_refused_at_registration(host: str) -> None:
    reason = url_error(f"http://{host}/x")
    assert "non-ASCII" in reason


def test_an_idn_must_be_written_in_its_punycode_form() -> None:
    reason = url_error("https://bücher.example/hook")
    assert "xn--" in reason
    assert "xn--bcher-kva.example" in reason  # the form to write instead
    url = "https://xn--bcher-kva.example/hook"
    assert validate_target({"type": "http", "url": url})["url"] == url


def test_the_fullwidth_metadata_address_is_refused_like_the_plain_one() -> None:
    assert "169.254.169.254" in url_error("http://１６９.２５４.１６９.２５４/latest/meta-data/")
    assert "link-local" in url_error("http://169.254.169.254/latest/meta-data/")


@pytest.mark.parametrize("host", NUMERIC_FORMS)
def test_number_like_ipv4_forms_are_refused_at_registration(host: str) -> None:
    assert "number-like" in url_error(f"http://{host}:18080/x")


@pytest.mark.parametrize(("address", "carried"), EMBEDDED_IPV6)
def test_ipv6_forms_carrying_a_non_public_ipv4_address_are_refused(
    address: str, carried: str
) -> None:
    reason = url_error(f"http://[{address}]:18080/x")
    assert f"carries the IPv4 address {carried}" in reason


@pytest.mark.parametrize("address", EMBEDDED_LINK_LOCAL)
def test_ipv6_forms_of_link_local_addresses_are_refused(address: str) -> None:
    reason = url_error(f"http://[{address}]/latest/meta-data/")
    assert "link-local" in reason or "zone" in reason


@pytest.mark.parametrize(
    "host",
    ["%31%32%37.0.0.1", "127.0.0.1%00", "a_b$.example", "hooks..example.com", "-" * 64 + ".com"],
)
def test_hosts_outside_plain_host_name_syntax_are_refused(host: str) -> None:
    url_error(f"http://{host}/x")


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com/x",
        "https://Hooks.Example.COM/x",
        "https://hooks.example.com./x",
        "http://my_service.internal:8080/x",
        "http://127.0.0.1:8080/x",  # loopback and private: the worker's allow-list decides
        "http://10.0.0.5/x",
        "http://0.0.0.0/x",
        "http://[::1]:8080/x",
        "http://[2001:db8::1]/x",
        "http://[64:ff9b::808:808]/x",  # NAT64 of a public address
        "http://203.0.113.7/x",
        "http://1.2.3.4.example.com/x",
        "http://0x7f.example.com/x",  # a name: the last label is not a number
    ],
)
def test_plain_hosts_are_accepted(url: str) -> None:
    assert validate_target({"type": "http", "url": url})["url"] == url


async def test_the_api_answers_422_naming_the_field(tmp_path: Path) -> None:
    async with AsyncApp(str(tmp_path / "api.db")) as app:
        api = create_api(app, auth_required=False)
        transport = httpx.ASGITransport(app=api, raise_app_exceptions=False)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1/api/v1") as c:
            for n, url in enumerate(
                [
                    "http://１６９.２５４.１６９.２５４/latest/meta-data/",
                    "http://169.254.169.254/latest/meta-data/",
                    "http://１２７.０.０.１:18080/x",
                    "http://127。0。0。1:18080/x",
                    "http://2130706433:18080/x",
                    "http://[::ffff:127.0.0.1]:18080/x",
                ]
            ):
                target = {"type": "http", "url": url}
                response = await c.post(
                    "/jobs", json={"name": f"h{n}", "target": target, "every": 60}
                )
                assert response.status_code == 422, (url, response.text)
                assert response.json().get("field") == "target.url", response.text
            target = {"type": "http", "url": "https://xn--bcher-kva.example/x"}
            response = await c.post("/jobs", json={"name": "ok", "target": target, "every": 60})
            assert response.status_code == 201, response.text
        assert [job.name for job in (await app.jobs.find()).items] == ["ok"]


# --- the policy on addresses -------------------------------------------------------------------


@pytest.mark.parametrize(("address", "carried"), EMBEDDED_IPV6)
def test_the_policy_refuses_ipv6_forms_of_non_public_ipv4(address: str, carried: str) -> None:
    policy = HostPolicy.parse("")
    assert policy.refusal(ipaddress.ip_address(address)) is not None
    with pytest.raises(HostRefused):
        policy.check_addresses("hooks.test", [address])


@pytest.mark.parametrize("address", EMBEDDED_LINK_LOCAL[:-1])
def test_ipv6_forms_of_link_local_are_refused_whatever_is_listed(address: str) -> None:
    policy = HostPolicy.parse("public,0.0.0.0/0,::/0,169.254.0.0/16,hooks.test")
    assert "link-local" in (policy.refusal(ipaddress.ip_address(address)) or "")
    with pytest.raises(HostRefused, match="link-local"):
        policy.check_addresses("hooks.test", [address])


@pytest.mark.parametrize("address", ["::ffff:8.8.8.8", "64:ff9b::808:808", "2606:4700:4700::1111"])
def test_public_addresses_stay_allowed_in_their_ipv6_forms(address: str) -> None:
    policy = HostPolicy.parse("")
    assert policy.refusal(ipaddress.ip_address(address)) is None


def test_listing_an_ipv4_address_lists_its_mapped_form() -> None:
    policy = HostPolicy.parse("127.0.0.1")
    assert policy.refusal(ipaddress.ip_address("::ffff:127.0.0.1")) is None  # the same socket


@pytest.mark.parametrize(
    "address",
    [
        pytest.param("2002:7f00:1::", id="6to4"),
        pytest.param("::127.0.0.1", id="ipv4-compatible"),
        pytest.param("2001:0:4136:e378:8000:63bf:80ff:fffe", id="teredo"),
    ],
)
def test_listing_an_ipv4_address_does_not_list_its_tunnelled_forms(address: str) -> None:
    policy = HostPolicy.parse("127.0.0.1")
    assert policy.refusal(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param("localhost", id="name"),
        pytest.param("１２７.０.０.１", id="fullwidth-digits"),
        pytest.param("2130706433", id="decimal"),
        pytest.param("0x7f.1", id="hex-short"),
        pytest.param("127.1", id="short"),
    ],
)
def test_only_numeric_answers_are_connected_to(answer: str) -> None:
    policy = HostPolicy.parse("public,127.0.0.1")
    with pytest.raises(HostRefused, match="not a numeric IP address"):
        policy.check_addresses("hooks.test", [answer])


def test_an_ip_address_is_never_a_listed_name() -> None:
    policy = HostPolicy.parse("*.0.0.1")
    assert not policy.name_listed("127.0.0.1")
    with pytest.raises(HostRefused):
        policy.check_addresses("127.0.0.1", ["127.0.0.1"])


# --- delivery: what the worker sends -----------------------------------------------------------


@pytest.mark.parametrize("host", UNICODE_LOOPBACK)
async def test_a_unicode_host_never_reaches_a_loopback_listener(
    host: str, receiver: Receiver, connects: list[tuple[str, int]]
) -> None:
    receiver.plan("/x", Reply(200))
    with pytest.raises(WebhookRejected, match="non-ASCII") as caught:
        await send(executor(), f"http://{host}:{receiver.port}/x")
    assert isinstance(caught.value, Permanent)  # the run goes dead, not retried
    assert receiver.hits == []
    assert connects == []


@pytest.mark.parametrize("host", [*UNICODE_LOOPBACK, "127.0.0.1", "[::ffff:127.0.0.1]"])
async def test_the_connect_time_guard_refuses_loopback_whatever_the_spelling(
    host: str, receiver: Receiver, connects: list[tuple[str, int]], unchecked_targets: None
) -> None:
    receiver.plan("/x", Reply(200))
    resolver = TableResolver({"localhost": [["127.0.0.1"]]})
    with pytest.raises(HostRefused, match="DUETIME_HTTP_ALLOW_HOSTS"):
        await send(executor("", resolver), f"http://{host}:{receiver.port}/x")
    assert receiver.hits == []
    assert connects == []  # refused before connect(): not even a TCP handshake


@pytest.mark.parametrize("host", NUMERIC_FORMS[:-1])
async def test_number_like_forms_read_as_the_os_would_are_refused_at_connect(
    host: str, receiver: Receiver, connects: list[tuple[str, int]], unchecked_targets: None
) -> None:
    receiver.plan("/x", Reply(200))
    resolver = TableResolver({}, like_the_os=True)
    with pytest.raises((HostRefused, WebhookRejected, WebhookFailed)):
        await send(executor("", resolver), f"http://{host}:{receiver.port}/x")
    assert receiver.hits == []
    assert connects == []


@pytest.mark.parametrize(
    ("allow", "answers"),
    [
        pytest.param("", ["127.0.0.1"], id="loopback"),
        pytest.param("", ["::1"], id="ipv6-loopback"),
        pytest.param("", ["10.0.0.1"], id="private"),
        pytest.param("", ["0.0.0.0"], id="unspecified"),
        pytest.param("", ["::ffff:127.0.0.1"], id="ipv4-mapped"),
        pytest.param("", ["64:ff9b::7f00:1"], id="nat64"),
        pytest.param("", ["2002:7f00:1::"], id="6to4"),
        pytest.param("", ["::127.0.0.1"], id="ipv4-compatible"),
        pytest.param("", ["169.254.169.254"], id="metadata"),
        pytest.param("hooks.test", ["169.254.169.254"], id="metadata-by-listed-name"),
        pytest.param("hooks.test", ["64:ff9b::a9fe:a9fe"], id="nat64-metadata-by-listed-name"),
        pytest.param("127.0.0.2", ["127.0.0.2", "127.0.0.1"], id="one-address-of-two"),
        pytest.param("127.0.0.1", ["127.0.0.1", "localhost"], id="a-non-numeric-answer"),
    ],
)
async def test_a_name_resolving_to_a_refused_address_is_refused(
    allow: str,
    answers: list[str],
    receiver: Receiver,
    connects: list[tuple[str, int]],
) -> None:
    receiver.plan("/x", Reply(200))
    resolver = TableResolver({"hooks.test": [answers]})
    with pytest.raises(HostRefused, match=r"refused to send to hooks\.test"):
        await send(executor(allow, resolver), f"http://hooks.test:{receiver.port}/x")
    assert resolver.calls == ["hooks.test"]
    assert receiver.hits == []
    assert connects == []


@pytest.mark.parametrize(
    ("allow", "host"),
    [
        pytest.param("127.0.0.1", "127.0.0.1", id="listed-address"),
        pytest.param("10.0.0.0/8,127.0.0.0/8", "127.0.0.1", id="listed-range"),
        pytest.param("127.0.0.1", "hooks.test", id="name-to-listed-address"),
        pytest.param("hooks.test", "hooks.test", id="listed-name"),
        pytest.param("*.test", "hooks.test", id="listed-wildcard"),
    ],
)
async def test_the_allow_list_still_permits_what_it_names(
    allow: str, host: str, receiver: Receiver, connects: list[tuple[str, int]]
) -> None:
    receiver.plan("/x", Reply(200))
    resolver = TableResolver({"hooks.test": [["127.0.0.1"]]})
    await send(executor(allow, resolver), f"http://{host}:{receiver.port}/x")
    assert len(receiver.hits_of("/x")) == 1
    assert connects == [("127.0.0.1", receiver.port)]


@pytest.fixture
async def second_loopback(receiver: Receiver) -> AsyncIterator[Receiver]:
    """A listener on 127.0.0.2, on the same port as ``receiver`` (127.0.0.1)."""
    other = Receiver()
    try:
        await other.start("127.0.0.2", receiver.port)
    except OSError as exc:  # pragma: no cover - 127.0.0.2 is loopback on Linux, not everywhere
        pytest.skip(f"cannot listen on 127.0.0.2: {exc}")
    try:
        yield other
    finally:
        await other.stop()


async def test_dns_rebinding_between_check_and_connect_is_impossible(
    receiver: Receiver, second_loopback: Receiver, connects: list[tuple[str, int]]
) -> None:
    """The name answers an allowed address (127.0.0.2 stands for a public one) on its first
    lookup and 127.0.0.1 afterwards. Were the name resolved once to check and again to
    connect, the request would reach the 127.0.0.1 listener: it never does."""
    trap, good = receiver, second_loopback
    trap.plan("/x", Reply(200))
    good.plan("/x", Reply(200))
    resolver = TableResolver({"rebind.test": [["127.0.0.2"], ["127.0.0.1"]]})
    url = f"http://rebind.test:{receiver.port}/x"

    await send(executor("127.0.0.2", resolver), url)
    assert resolver.calls == ["rebind.test"]  # one lookup: checked and connected to
    assert connects == [("127.0.0.2", receiver.port)]
    assert len(good.hits) == 1
    assert trap.hits == []

    # a new connection (a new pool: no cached answer) looks up again and gets 127.0.0.1
    with pytest.raises(HostRefused, match=r"127\.0\.0\.1"):
        await send(executor("127.0.0.2", resolver), url)
    assert resolver.calls == ["rebind.test", "rebind.test"]
    assert connects == [("127.0.0.2", receiver.port)]
    assert trap.hits == []


# --- the socket-level check on its own ---------------------------------------------------------


@pytest.fixture
def socket_check_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Take away the connector's address check after resolution, as if aiohttp had moved its
    IP-literal shortcut elsewhere: only the socket factory's check is left."""
    monkeypatch.setattr(GuardedConnector, "_resolve_host", aiohttp.TCPConnector._resolve_host)


@pytest.mark.parametrize("host", ["127.0.0.1", "１２７.０.０.１", "127。0。0。1", "hooks.test"])
async def test_the_socket_factory_alone_refuses_before_connect(
    host: str,
    receiver: Receiver,
    connects: list[tuple[str, int]],
    unchecked_targets: None,
    socket_check_only: None,
) -> None:
    receiver.plan("/x", Reply(200))
    resolver = TableResolver({"hooks.test": [["127.0.0.1"]]})
    with pytest.raises(HostRefused, match=r"127\.0\.0\.1 is not a public address"):
        await send(executor("", resolver), f"http://{host}:{receiver.port}/x")
    assert receiver.hits == []
    assert connects == []


async def test_the_socket_factory_alone_lets_a_listed_name_through(
    receiver: Receiver, connects: list[tuple[str, int]], socket_check_only: None
) -> None:
    receiver.plan("/x", Reply(200))
    resolver = TableResolver({"hooks.test": [["127.0.0.1"]]})
    await send(executor("hooks.test", resolver), f"http://hooks.test:{receiver.port}/x")
    assert len(receiver.hits) == 1
    assert connects == [("127.0.0.1", receiver.port)]


async def test_the_socket_factory_fails_closed_without_the_connections_name(
    receiver: Receiver,
    connects: list[tuple[str, int]],
    socket_check_only: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Were the host name not handed to the socket factory (an aiohttp change), a listed name
    is refused rather than anything let through."""
    monkeypatch.setattr(
        GuardedConnector,
        "_create_direct_connection",
        aiohttp.TCPConnector._create_direct_connection,
    )
    receiver.plan("/x", Reply(200))
    resolver = TableResolver({"hooks.test": [["127.0.0.1"]]})
    with pytest.raises(HostRefused):
        await send(executor("hooks.test", resolver), f"http://hooks.test:{receiver.port}/x")
    assert receiver.hits == []
    assert connects == []


def test_the_default_executor_uses_the_guarded_connector() -> None:
    async def build() -> type:
        http = HttpExecutor(secret_for=_secret, policy=HostPolicy.parse(""))
        try:
            return type(http._get_session().connector)
        finally:
            await http.close()

    assert asyncio.run(build()) is GuardedConnector


@pytest.fixture(autouse=True)
def _no_system_resolver(monkeypatch: pytest.MonkeyPatch) -> None:
    """Belt and braces: fail a test that reaches the system's resolver."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"a test used the system resolver: {args!r}")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
