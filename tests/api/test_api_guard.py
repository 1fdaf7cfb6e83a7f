"""What every request passes before a route sees it (duetime.api.guard) and how long a
connection may take (duetime.api.http_server):

- the open API (``duetime up``) answers only loopback ``Host`` names and ``Origin``s, plus
  ``DUETIME_API_ALLOWED_HOSTS`` (DNS rebinding, CSRF); with keys required any host;
- bodies must be JSON (415), at most the body limit (413 from ``Content-Length`` at once, or
  as soon as a chunked body passes it), and a request with a body is authenticated before it
  is read (401 unread); bad keys are limited per client address (429);
- idle and half-open connections are closed by the server within their timeouts.

In process (raw ASGI calls, to see whether the body was read) and against real servers (raw
sockets, for what uvicorn does with the connection)."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from duetime._config import Settings
from duetime.api import create_api
from duetime.api.guard import allowed_hosts, host_of, is_json
from duetime.api.ratelimit import client_key, failure_limiter
from duetime.app import AsyncApp
from tests.api.apikit import ServerProcess, make_keys, ok, problem, start, unique

LIMIT = 100_000
"""The body limit of these tests' servers (DUETIME_API_MAX_BODY_BYTES, with a payload limit
small enough not to raise it)."""
SMALL = {"api_max_body_bytes": LIMIT, "payload_limit": 1024}


@pytest.fixture
async def app(tmp_path: Path) -> AsyncIterator[AsyncApp]:
    async with AsyncApp(str(tmp_path / "guard.db")) as opened:
        yield opened


def client(api: object, host: str = "127.0.0.1", **headers: str) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=api, raise_app_exceptions=False)  # type: ignore[arg-type]
    return httpx.AsyncClient(transport=transport, base_url=f"http://{host}", headers=headers)


async def new_job(c: httpx.AsyncClient) -> dict[str, Any]:
    body = {"name": unique(), "task": "t", "every": 3600, "allow_unregistered": True}
    return ok(await c.post("/api/v1/jobs", json=body), 201)  # type: ignore[no-any-return]


# --- raw ASGI calls: was the body read? ----------------------------------------------------------


class Asgi:
    """One request straight to the ASGI app; ``reads`` counts the body messages it took."""

    def __init__(self, api: Any) -> None:
        self.api = api
        self.reads = 0

    async def __call__(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        chunks: Iterator[bytes],
        client: str = "127.0.0.1",
    ) -> tuple[int, dict[str, str], dict[str, Any]]:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
            "client": (client, 50000),
            "server": ("127.0.0.1", 8000),
        }

        async def receive() -> dict[str, Any]:
            chunk = next(chunks, None)
            if chunk is None:  # a client that stops sending: never answers
                await asyncio.Event().wait()
            self.reads += 1
            return {"type": "http.request", "body": chunk, "more_body": True}

        sent: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await asyncio.wait_for(self.api(scope, receive, send), 10)
        start_message = sent[0]
        body = b"".join(m.get("body", b"") for m in sent[1:])
        answer = {k.decode(): v.decode() for k, v in start_message["headers"]}
        return start_message["status"], answer, json.loads(body)


def endless(size: int = 8192) -> Iterator[bytes]:
    while True:
        yield b" " * size


# --- open mode: Host and Origin ------------------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost:8000", "127.1.2.3:80", "[::1]:8000"])
async def test_open_api_answers_loopback_hosts(app: AsyncApp, host: str) -> None:
    async with client(create_api(app, auth_required=False), host=host) as c:
        ok(await c.get("/api/v1/jobs"))
        await new_job(c)


@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:8000", "10.0.0.1"])
async def test_open_api_refuses_other_hosts(app: AsyncApp, host: str) -> None:
    """A name rebound to 127.0.0.1 reaches the server with its own Host: refused."""
    async with client(create_api(app, auth_required=False), host=host) as c:
        body = problem(await c.get("/api/v1/jobs"), 403)
        assert body["type"].endswith("host-not-allowed")
        assert "Host" in body["detail"]
        assert "DUETIME_API_ALLOWED_HOSTS" in body["detail"]
        job = {"name": "x", "task": "t", "every": 5, "allow_unregistered": True}
        problem(await c.post("/api/v1/jobs", json=job), 403)
        problem(await c.get("/"), 403)  # the dashboard too
        ok(await c.get("/healthz"))  # probes answer any host


async def test_allowed_hosts_setting(app: AsyncApp) -> None:
    settings = app.settings.with_(api_allowed_hosts="Duetime.LAN, 192.0.2.7")
    api = create_api(app, settings, auth_required=False)
    for host in ("duetime.lan:8000", "192.0.2.7", "localhost"):
        async with client(api, host=host) as c:
            ok(await c.get("/api/v1/jobs"))
    async with client(api, host="other.lan") as c:
        problem(await c.get("/api/v1/jobs"), 403)
    anything = create_api(app, app.settings.with_(api_allowed_hosts="*"), auth_required=False)
    async with client(anything, host="other.lan", Origin="http://other.lan") as c:
        ok(await c.get("/api/v1/jobs"))


async def test_with_keys_required_any_host_is_answered(app: AsyncApp) -> None:
    _, secret = await app.for_tenant("acme").create_key("viewer")
    api = create_api(app, auth_required=True)
    async with client(api, host="api.example.com", Origin="https://else.example") as c:
        ok(await c.get("/api/v1/jobs", headers={"Authorization": f"Bearer {secret}"}))


@pytest.mark.parametrize(
    "origin", ["https://attacker.example", "http://attacker.example:8000", "null", "file://"]
)
async def test_open_api_refuses_foreign_origins(app: AsyncApp, origin: str) -> None:
    api = create_api(app, auth_required=False)
    async with client(api, Origin=origin) as c:
        body = problem(await c.post("/api/v1/schedules/preview", json={"cron": "* * * * *"}), 403)
        assert body["type"].endswith("origin-not-allowed")
        assert "Origin" in body["detail"]
        assert "DUETIME_API_ALLOWED_HOSTS" in body["detail"]
        problem(await c.get("/api/v1/jobs"), 403)


@pytest.mark.parametrize(
    "origin", ["http://127.0.0.1:8000", "http://localhost:5173", "http://[::1]:8000"]
)
async def test_open_api_takes_loopback_origins(app: AsyncApp, origin: str) -> None:
    async with client(create_api(app, auth_required=False), Origin=origin) as c:
        ok(await c.post("/api/v1/schedules/preview", json={"cron": "* * * * *", "count": 1}))


def test_host_parsing() -> None:
    assert host_of("LocalHost:80") == "localhost"
    assert host_of("[::1]:8000") == "::1"
    assert host_of("[::1]") == "::1"
    assert host_of("example.com.") == "example.com"
    assert allowed_hosts(" a.lan ,[::2], ") == frozenset({"a.lan", "::2"})
    assert allowed_hosts("a.lan,*") is None


# --- bodies: JSON only ------------------------------------------------------------------------


@pytest.mark.parametrize("auth_required", [False, True])
async def test_bodies_must_be_json(app: AsyncApp, auth_required: bool) -> None:
    _, secret = await app.for_tenant("default").create_key("operator")
    api = create_api(app, auth_required=auth_required)
    async with client(api, Authorization=f"Bearer {secret}") as c:
        job = await new_job(c)
        pause = f"/api/v1/jobs/{job['id']}/pause"
        # a simple form post (no preflight) to a route that reads no body: refused
        text = await c.post(pause, content=b"x=1", headers={"Content-Type": "text/plain"})
        body = problem(text, 415)
        assert "application/json" in body["detail"]
        assert "text/plain" in body["detail"]
        assert ok(await c.get(f"/api/v1/jobs/{job['id']}"))["status"] == "active"
        form = {"name": unique(), "task": "t", "every": "5"}
        problem(await c.post("/api/v1/jobs", data=form), 415)
        multipart = await c.post("/api/v1/jobs", files={"f": b"{}"})
        problem(multipart, 415)
        none = await c.post(pause, content=b"{}", headers={"Content-Type": ""})
        problem(none, 415)
        # JSON, with parameters or a +json type, and no body at all, pass
        charset = {"Content-Type": "application/json; charset=utf-8"}
        ok(await c.post(pause, content=b"{}", headers=charset))
        merge = {"Content-Type": "application/merge-patch+json"}
        patched = await c.patch(
            f"/api/v1/jobs/{job['id']}", content=b'{"priority": 3}', headers=merge
        )
        assert ok(patched)["priority"] == 3
        ok(await c.post(f"/api/v1/jobs/{job['id']}/resume"))


def test_json_media_types() -> None:
    assert is_json("application/json")
    assert is_json("Application/JSON ; charset=utf-8")
    assert is_json("application/problem+json")
    assert not is_json("text/json")
    assert not is_json("application/jsonp")
    assert not is_json("multipart/form-data; boundary=x")


# --- bodies: size, and authentication first -----------------------------------------------------


async def test_declared_oversize_is_413_before_auth_unread(app: AsyncApp) -> None:
    call = Asgi(create_api(app, app.settings.with_(**SMALL), auth_required=True))
    headers = {"host": "127.0.0.1", "content-type": "application/json"}
    status, answer, body = await call(
        "POST", "/api/v1/jobs", {**headers, "content-length": str(50_000_000)}, endless()
    )
    assert status == 413
    assert body["type"].endswith("too-large")
    assert str(LIMIT) in body["detail"]
    assert answer["connection"] == "close"
    assert call.reads == 0


async def test_streamed_oversize_is_413_once_past_the_limit(app: AsyncApp) -> None:
    """A chunked body (no Content-Length) is read only up to the limit."""
    _, secret = await app.for_tenant("default").create_key("operator")
    call = Asgi(create_api(app, app.settings.with_(**SMALL), auth_required=True))
    headers = {
        "host": "127.0.0.1",
        "content-type": "application/json",
        "transfer-encoding": "chunked",
        "authorization": f"Bearer {secret}",
    }
    status, answer, body = await call("POST", "/api/v1/jobs", headers, endless(8192))
    assert status == 413, body
    assert answer["connection"] == "close"
    assert call.reads == LIMIT // 8192 + 1


async def test_unauthenticated_body_is_401_unread(app: AsyncApp) -> None:
    call = Asgi(create_api(app, app.settings.with_(**SMALL), auth_required=True))
    headers = {
        "host": "127.0.0.1",
        "content-type": "application/json",
        "content-length": str(LIMIT),
    }
    for extra in ({}, {"authorization": "Bearer dt_not-a-key"}, {"x-api-key": "dt_nope"}):
        status, answer, body = await call("POST", "/api/v1/jobs", {**headers, **extra}, endless())
        assert status == 401, body
        assert answer["connection"] == "close"
        assert answer["www-authenticate"].startswith("Bearer")
    assert call.reads == 0


async def test_a_key_is_looked_up_once_per_request(
    app: AsyncApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, secret = await app.for_tenant("default").create_key("operator")
    lookups: list[str] = []
    authenticate = app.authenticate

    async def counted(given: str) -> Any:
        lookups.append(given)
        return await authenticate(given)

    monkeypatch.setattr(app, "authenticate", counted)
    async with client(create_api(app, auth_required=True), Authorization=f"Bearer {secret}") as c:
        job = await new_job(c)  # with a body: the guard looks it up, the route reuses it
        assert lookups == [secret]
        ok(await c.get(f"/api/v1/jobs/{job['id']}"))  # without: the route looks it up
        assert lookups == [secret, secret]


async def test_failed_authentications_are_limited_per_address(app: AsyncApp) -> None:
    _, secret = await app.for_tenant("default").create_key("operator")
    api = create_api(app, app.settings.with_(api_auth_failures=3), auth_required=True)
    async with client(api, Authorization="Bearer dt_wrong") as c:
        for _ in range(3):
            problem(await c.get("/api/v1/jobs"), 401)
        limited = await c.get("/api/v1/jobs")
        body = problem(limited, 429)
        assert "127.0.0.1" in body["detail"]
        assert 1 <= int(limited.headers["retry-after"]) <= 20
        # with a body (the guard's check) too, and even a good key from that address
        problem(await c.post("/api/v1/jobs", json={}), 429)
        problem(await c.get("/api/v1/jobs", headers={"Authorization": f"Bearer {secret}"}), 429)
        problem(await c.get("/api/v1/jobs", headers={"Authorization": ""}), 401)  # no key: 401
        ok(await c.get("/healthz"))
    # another address is not affected
    other = httpx.ASGITransport(app=api, client=("192.0.2.1", 1234))  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=other, base_url="http://127.0.0.1") as c:
        ok(await c.get("/api/v1/jobs", headers={"Authorization": f"Bearer {secret}"}))
        problem(await c.get("/api/v1/jobs", headers={"Authorization": "Bearer dt_x"}), 401)


def test_failure_limiter_refills_and_counts_by_address() -> None:
    now = [0.0]
    limiter = failure_limiter(2, clock=lambda: now[0])
    assert limiter.blocked("a") is None
    limiter.acquire("a")
    limiter.acquire("a")
    assert limiter.blocked("a") == 30
    assert limiter.blocked("b") is None
    now[0] = 30.0
    assert limiter.blocked("a") is None
    assert failure_limiter(0).blocked("a") is None
    assert client_key("2001:db8::1") == client_key("2001:db8::ffff") == "2001:db8::/64"
    assert client_key("::ffff:192.0.2.1") == "192.0.2.1"
    assert client_key(None) == "unknown"


async def test_openapi_documents_413_and_415_on_bodies(app: AsyncApp) -> None:
    document = create_api(app, auth_required=False).openapi()
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            statuses = set(operation["responses"])
            if "requestBody" in operation:
                assert {"413", "415"} <= statuses, (method, path)
                assert "application/problem+json" in operation["responses"]["415"]["content"]
            else:
                assert not {"413", "415"} & statuses, (method, path)


@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("api_max_body_bytes", 10),
        ("api_keep_alive", 0),
        ("api_header_timeout", -1),
        ("api_body_timeout", 0),
        ("api_auth_failures", -1),
    ],
)
def test_a_bad_api_setting_is_refused_by_name(name: str, bad: int) -> None:
    with pytest.raises(ValueError, match=name):
        Settings(**{name: bad})  # type: ignore[arg-type]


def test_api_settings_are_read() -> None:
    Settings(api_max_body_bytes=1024, api_auth_failures=0, api_max_connections=0)
    env = {"DUETIME_API_ALLOWED_HOSTS": "a.lan", "DUETIME_API_KEEP_ALIVE": "0.5"}
    settings = Settings.from_env(env)
    assert (settings.api_allowed_hosts, settings.api_keep_alive) == ("a.lan", 0.5)


# --- real servers: what uvicorn does with the connection ----------------------------------------

TIMEOUTS = {
    "DUETIME_API_KEEP_ALIVE": "0.5",
    "DUETIME_API_HEADER_TIMEOUT": "1",
    "DUETIME_API_BODY_TIMEOUT": "1",
    "DUETIME_API_MAX_BODY_BYTES": str(LIMIT),
    "DUETIME_PAYLOAD_LIMIT": "1024",
    "DUETIME_API_ALLOWED_HOSTS": "duetime.test",
}
WAIT = 8.0
"""How long a test waits for the server to answer or close (well over the timeouts above)."""


@pytest.fixture(scope="module")
def open_up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """``duetime up``: the open API, with short timeouts and a small body limit."""
    workdir = tmp_path_factory.mktemp("guard-up")
    proc = start(str(workdir / "up.db"), command="up", cwd=workdir, env=TIMEOUTS)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, str]]:
    """``duetime server`` with keys required, the same limits."""
    workdir = tmp_path_factory.mktemp("guard-server")
    db = str(workdir / "server.db")
    key = make_keys(db).acme_operator
    proc = start(db, cwd=workdir, env=TIMEOUTS)
    yield proc, key
    proc.stop()


def connect(server: ServerProcess) -> socket.socket:
    address = urlsplit(server.url)
    sock = socket.create_connection((address.hostname, address.port), timeout=WAIT)
    return sock


def until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (fails after WAIT)."""
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        raise AssertionError(f"the server kept the connection open: {data[:300]!r}") from None
    return data


def response(data: bytes) -> tuple[int, dict[str, Any]]:
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body) if body else {}


def post_head(path: str, length: int | None, **headers: str) -> bytes:
    lines = [f"POST /api/v1{path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    lines.append("Transfer-Encoding: chunked" if length is None else f"Content-Length: {length}")
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@pytest.mark.slow
def test_real_open_server_refuses_rebound_hosts_and_foreign_origins(open_up: ServerProcess) -> None:
    with httpx.Client(base_url=open_up.url + "/api/v1", timeout=WAIT) as c:
        ok(c.get("/jobs"))
        ok(c.get("/jobs", headers={"Host": "localhost"}))
        ok(c.get("/jobs", headers={"Host": "duetime.test:80"}))  # DUETIME_API_ALLOWED_HOSTS
        body = problem(c.get("/jobs", headers={"Host": "rebound.attacker.example"}), 403)
        assert "DUETIME_API_ALLOWED_HOSTS" in body["detail"]
        job = {"name": unique(), "task": "t", "every": 60, "allow_unregistered": True}
        problem(c.post("/jobs", json=job, headers={"Origin": "https://attacker.example"}), 403)
        ok(c.post("/jobs", json=job, headers={"Origin": open_up.url}), 201)
        plain = c.post("/jobs", content=json.dumps(job), headers={"Content-Type": "text/plain"})
        problem(plain, 415)
        problem(c.post("/jobs", data={"name": "x"}), 415)


@pytest.mark.slow
@pytest.mark.parametrize("with_key", [False, True])
def test_real_declared_oversize_is_answered_at_once(
    keyed: tuple[ServerProcess, str], with_key: bool
) -> None:
    """50 MB announced, 1 KB sent: 413 straight away, and the connection closed."""
    server, key = keyed
    auth = {"Authorization": f"Bearer {key}"} if with_key else {}
    began = time.monotonic()
    with connect(server) as sock:
        sock.sendall(post_head("/jobs", 50_000_000, **auth) + b"[" * 1024)
        status, body = response(until_closed(sock))
    assert status == 413, body
    assert body["type"].endswith("too-large")
    assert time.monotonic() - began < WAIT / 2


@pytest.mark.slow
def test_real_chunked_oversize_is_413(keyed: tuple[ServerProcess, str]) -> None:
    server, key = keyed

    def chunk(size: int) -> bytes:
        return f"{size:x}\r\n".encode() + b" " * size + b"\r\n"

    # up to one byte past the limit (all of it read, so the server's close is clean), and
    # never finished
    whole, rest = divmod(LIMIT + 1, 8192)
    with connect(server) as sock:
        sock.sendall(post_head("/jobs", None, Authorization=f"Bearer {key}"))
        sock.sendall(chunk(8192) * whole + chunk(rest))
        status, body = response(until_closed(sock))
    assert status == 413, body


@pytest.mark.slow
def test_real_unauthenticated_body_is_401_unread(keyed: tuple[ServerProcess, str]) -> None:
    server, _ = keyed
    for auth in ({}, {"Authorization": "Bearer dt_wrong"}):
        with connect(server) as sock:
            sock.sendall(post_head("/jobs", LIMIT, **auth) + b"[" * 100)  # the rest never comes
            status, body = response(until_closed(sock))
        assert status == 401, body


@pytest.mark.slow
def test_real_idle_connection_is_closed(open_up: ServerProcess) -> None:
    with connect(open_up) as sock:
        assert until_closed(sock) == b""  # nothing ever sent: closed after the keep-alive


@pytest.mark.slow
def test_real_keep_alive_connection_is_closed_after_its_response(open_up: ServerProcess) -> None:
    with connect(open_up) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        status, _ = response(until_closed(sock))
    assert status == 200


@pytest.mark.slow
def test_real_trickled_headers_are_cut_off(open_up: ServerProcess) -> None:
    """Slowloris: a header byte now and then does not keep the connection open."""
    began = time.monotonic()
    with connect(open_up) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        sock.settimeout(0.2)
        while True:  # one more byte every 0.2 s, until the server hangs up
            try:
                if sock.recv(1024) == b"":
                    break
            except ConnectionResetError:  # a byte sent as it closed
                break
            except TimeoutError:
                try:
                    sock.sendall(b"a")
                except OSError:  # closed meanwhile
                    break
            assert time.monotonic() - began < WAIT, "the server kept the connection open"
    assert time.monotonic() - began >= 0.9  # the header timeout (1 s), not the idle one


@pytest.mark.slow
def test_real_half_sent_body_is_cut_off(open_up: ServerProcess) -> None:
    with connect(open_up) as sock:
        sock.sendall(post_head("/schedules/preview", 1000) + b'{"cron": ')
        assert until_closed(sock) == b""  # the body timeout (1 s): closed, no answer
