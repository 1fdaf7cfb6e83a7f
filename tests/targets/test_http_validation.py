"""HTTP targets without a network: validation at registration (errors name the field), the
host allow-list's decisions, ``Retry-After`` parsing and the signature."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest

from duetime import App, Settings, ValidationError
from duetime.targets.http import (
    HTTP_TASK,
    HostPolicy,
    HostRefused,
    retry_after_seconds,
    sign,
    validate_target,
)


@pytest.fixture
def app(tmp_path: Path) -> Iterator[App]:
    with App(str(tmp_path / "app.db")) as opened:
        yield opened


def http(**fields: Any) -> dict[str, Any]:
    return {"type": "http", "url": "https://hooks.example.com/x", **fields}


@pytest.mark.parametrize(
    ("target", "field", "words"),
    [
        ("https://hooks.example.com", "target", "object"),
        ({"url": "https://hooks.example.com"}, "target.type", "unknown target type"),
        ({"type": "smtp", "url": "x"}, "target.type", "unknown target type"),
        (http(url=None), "target.url", "http"),
        (http(url="ftp://hooks.example.com/x"), "target.url", "scheme"),
        (http(url="file:///etc/passwd"), "target.url", "scheme"),
        (http(url="hooks.example.com/x"), "target.url", "scheme"),
        (http(url="https:///nohost"), "target.url", "no host"),
        (http(url="https://user:pw@hooks.example.com/"), "target.url", "credentials"),
        (http(url="https://hooks.example.com:99999/"), "target.url", "valid URL"),
        (http(url="https://hooks.example.com/a b"), "target.url", "spaces"),
        (http(url="http://169.254.169.254/latest/meta-data/"), "target.url", "link-local"),
        (http(url="http://[fe80::1]/"), "target.url", "link-local"),
        (http(url="http://[::ffff:169.254.169.254]/"), "target.url", "link-local"),
        (http(method="TRACE"), "target.method", "POST"),
        (http(method=1), "target.method", "POST"),
        (http(headers=["X-A"]), "target.headers", "object"),
        (http(headers={"Idempotency-Key": "mine"}), "target.headers", "reserved"),
        (http(headers={"duetime-signature": "v1=0"}), "target.headers", "reserved"),
        (http(headers={"Host": "internal"}), "target.headers", "reserved"),
        (http(headers={"X-Count": 1}), "target.headers", "string"),
        (http(headers={"X-Evil": "a\r\nHost: b"}), "target.headers", "line breaks"),
        (http(headers={"Bad Name": "x"}), "target.headers", "header name"),
        (http(timeout=0), "target.timeout", "3600"),
        (http(timeout=3601), "target.timeout", "3600"),
        (http(timeout="30"), "target.timeout", "3600"),
        (http(timeout=float("nan")), "target.timeout", "3600"),
        (http(body="{}"), "target.body", "unknown field"),
    ],
)
def test_bad_targets_are_refused_naming_the_field(
    app: App, target: object, field: str, words: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        app.schedule("hook", target=target, cron="0 2 * * *")  # type: ignore[arg-type]
    assert caught.value.field == field
    assert words in caught.value.reason
    assert app.jobs.find().items == []


def test_task_and_target_go_together_only_as_duetime_http(app: App) -> None:
    with pytest.raises(ValidationError) as caught:
        app.schedule("hook", task="duetime.noop", target=http(), cron="0 2 * * *")
    assert caught.value.field == "target"
    with pytest.raises(ValidationError) as caught:
        app.schedule("hook", task=HTTP_TASK, cron="0 2 * * *")
    assert caught.value.field == "target"
    with pytest.raises(ValidationError) as caught:
        app.schedule("hook", cron="0 2 * * *")
    assert caught.value.field == "task"

    job = app.schedule("hook", task=HTTP_TASK, target=http(), cron="0 2 * * *")
    assert job.task == HTTP_TASK


def test_a_target_is_normalized_stored_and_replaced(app: App) -> None:
    job = app.schedule(
        "hook", target=http(method="patch", headers={"X-A": "1"}, timeout=5), cron="0 2 * * *"
    )
    assert job.target == {
        "type": "http",
        "url": "https://hooks.example.com/x",
        "method": "PATCH",
        "headers": {"X-A": "1"},
        "timeout": 5.0,
    }
    assert app.get("hook").target == job.target
    python = app.schedule("hook", task="duetime.noop", cron="0 2 * * *")
    assert python.target is None
    assert python.task == "duetime.noop"


def test_validate_target_fills_in_defaults() -> None:
    assert validate_target({"type": "http", "url": "http://10.0.0.5:8080/hook"}) == {
        "type": "http",
        "url": "http://10.0.0.5:8080/hook",
        "method": "POST",
        "headers": {},
        "timeout": 30.0,
    }


# --- the allow-list ----------------------------------------------------------------------------


def refused(policy: HostPolicy, address: str) -> bool:
    return policy.refusal(ipaddress.ip_address(address)) is not None


PUBLIC = ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111"]
NOT_PUBLIC = [
    "127.0.0.1",
    "::1",
    "10.1.2.3",
    "172.16.0.1",
    "192.168.1.1",
    "100.64.0.1",
    "0.0.0.0",
    "::",
    "fc00::1",
    "224.0.0.1",
]
LINK_LOCAL = [
    "169.254.169.254",
    "169.254.0.1",
    "fe80::1",
    "::ffff:169.254.169.254",
    "64:ff9b::a9fe:a9fe",
]


@pytest.mark.parametrize("address", PUBLIC)
def test_by_default_public_addresses_are_allowed(address: str) -> None:
    assert not refused(HostPolicy.parse(""), address)


@pytest.mark.parametrize("address", NOT_PUBLIC + LINK_LOCAL)
def test_by_default_loopback_private_and_link_local_are_refused(address: str) -> None:
    assert refused(HostPolicy.parse(""), address)


@pytest.mark.parametrize("address", LINK_LOCAL)
def test_link_local_is_refused_whatever_is_listed(address: str) -> None:
    policy = HostPolicy.parse("public,169.254.0.0/16,fe80::/10,0.0.0.0/0,::/0,*.internal")
    assert "link-local" in (policy.refusal(ipaddress.ip_address(address)) or "")
    with pytest.raises(HostRefused):
        policy.check_addresses("meta.internal", [address])


def test_listed_addresses_and_ranges_are_allowed_and_only_them() -> None:
    policy = HostPolicy.parse(" 127.0.0.1 , 10.0.0.0/8,[::1]")
    assert not refused(policy, "127.0.0.1")
    assert not refused(policy, "10.200.0.1")
    assert not refused(policy, "::1")
    assert not refused(policy, "::ffff:127.0.0.1")
    assert refused(policy, "127.0.0.2")
    assert refused(policy, "192.168.1.1")
    assert refused(policy, "8.8.8.8")  # listing something drops "public" unless listed too
    assert not refused(HostPolicy.parse("public,127.0.0.1"), "8.8.8.8")


def test_every_resolved_address_must_be_allowed() -> None:
    policy = HostPolicy.parse("")
    policy.check_addresses("example.com", ["93.184.216.34"])
    with pytest.raises(HostRefused, match=r"10\.0\.0\.1"):
        policy.check_addresses("rebound.example.com", ["93.184.216.34", "10.0.0.1"])
    with pytest.raises(HostRefused, match="link-local"):
        policy.check_addresses("metadata.google.internal", ["169.254.169.254"])


def test_listed_host_names_may_resolve_to_private_addresses() -> None:
    policy = HostPolicy.parse("hooks.internal,*.svc.cluster.local")
    policy.check_addresses("hooks.internal", ["10.1.2.3"])
    policy.check_addresses("HOOKS.internal.", ["10.1.2.3"])
    policy.check_addresses("billing.svc.cluster.local", ["10.9.9.9", "fd00::1"])
    with pytest.raises(HostRefused):
        policy.check_addresses("other.internal", ["10.1.2.3"])
    with pytest.raises(HostRefused):
        policy.check_addresses("svc.cluster.local", ["10.1.2.3"])  # *. means subdomains


@pytest.mark.parametrize("entry", ["http://x.com", "10.0.0.0/33", "a..b", "*", "x y"])
def test_bad_allow_list_entries_are_refused(entry: str) -> None:
    with pytest.raises(ValidationError) as caught:
        HostPolicy.parse(entry)
    assert caught.value.field == "http_allow_hosts"


def test_the_allow_list_comes_from_the_environment() -> None:
    settings = Settings.from_env({"DUETIME_HTTP_ALLOW_HOSTS": "127.0.0.1,public"})
    assert settings.http_allow_hosts == "127.0.0.1,public"
    assert Settings().http_allow_hosts == ""


# --- Retry-After and the signature -------------------------------------------------------------


def test_retry_after_reads_seconds_and_http_dates() -> None:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    assert retry_after_seconds("30") == 30.0
    assert retry_after_seconds(" 7 ") == 7.0
    assert retry_after_seconds("0") == 0.0
    assert retry_after_seconds(format_datetime(now + timedelta(seconds=90), True), now) == 90.0
    assert retry_after_seconds(format_datetime(now - timedelta(hours=1), True), now) == 0.0
    assert retry_after_seconds("99999999") == 86_400.0
    assert retry_after_seconds(None) is None
    assert retry_after_seconds("") is None
    assert retry_after_seconds("-5") is None
    assert retry_after_seconds("soon") is None


def test_the_signature_is_hmac_sha256_over_timestamp_dot_body() -> None:
    body = b'{"a":1}'
    expected = hmac.new(b"s3cret", b'1700000000.{"a":1}', hashlib.sha256).hexdigest()
    assert sign("s3cret", 1_700_000_000, body) == f"v1={expected}"
