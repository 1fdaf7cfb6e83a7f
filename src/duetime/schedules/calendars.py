"""Exclusion calendars: which days (or wall-clock windows) a job does not fire on. Pure, no I/O.

A :class:`Calendar` is a tenant's named list of rules; an instant is *excluded* when one rule
matches it, read on the wall clock of the job's zone (a job in ``Europe/Paris`` skips a Paris
holiday from Paris midnight to Paris midnight):

- ``{"date": "2026-12-25"}`` — one day;
- ``{"from": "2026-12-24", "to": "2027-01-01"}`` — days from ``from`` to ``to``, both included;
- ``{"weekdays": ["sat", "sun"]}`` — days of the week (``mon`` … ``sun``);
- ``{"cron": "* 0-5 * * *"}`` — the wall-clock minutes a 5-field cron expression matches
  (here: from midnight to 05:59 every day);
- ``{"holidays": "US", "subdiv": "CA"}`` — the public holidays of a country (ISO 3166 code) and
  optionally one of its subdivisions, from the ``holidays`` package (kept up to date by its
  maintainers; its version decides new holidays).

A job that names calendars skips an excluded occurrence (recorded ``calendar:<name>``), or with
a :class:`CalendarShift` moves it to the same wall time of the next or previous day no calendar
excludes (:func:`shift_occurrence`). The run keeps the original occurrence as its
``scheduled_for`` — its identity, so a moved occurrence is never a second run — and only
becomes available at the moved instant.
"""

from __future__ import annotations

import enum
import functools
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from duetime.errors import ValidationError
from duetime.schedules.cron import parse_cron

CALENDAR_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""A calendar's name: 1-64 letters, digits, ``.``, ``_``, ``-``, starting with a letter or digit."""
MAX_RULES = 1000
MAX_SHIFT_DAYS = 366
"""A shift looks this many days ahead (or back) for a business day before it gives up (the
occurrence is then skipped)."""
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_HOLIDAYS_LOCK = threading.Lock()


class CalendarShift(enum.StrEnum):
    """What a job does with an occurrence its calendars exclude (None: skip it)."""

    NEXT_BUSINESS_DAY = "next_business_day"
    PREVIOUS_BUSINESS_DAY = "previous_business_day"


@dataclass(frozen=True, slots=True)
class DateRule:
    day: date

    def matches(self, wall: datetime) -> str | None:
        return str(self.day) if wall.date() == self.day else None


@dataclass(frozen=True, slots=True)
class RangeRule:
    first: date
    last: date

    def matches(self, wall: datetime) -> str | None:
        return f"{self.first}..{self.last}" if self.first <= wall.date() <= self.last else None


@dataclass(frozen=True, slots=True)
class WeekdaysRule:
    days: frozenset[int]
    """0 = Monday … 6 = Sunday."""

    def matches(self, wall: datetime) -> str | None:
        return WEEKDAYS[wall.weekday()] if wall.weekday() in self.days else None


@dataclass(frozen=True, slots=True)
class CronWindowRule:
    cron: str

    def matches(self, wall: datetime) -> str | None:
        minute = wall.replace(second=0, microsecond=0, tzinfo=None)
        return f"cron {self.cron}" if _cron_matches(self.cron, minute) else None


@dataclass(frozen=True, slots=True)
class HolidaysRule:
    country: str
    subdiv: str | None = None

    def matches(self, wall: datetime) -> str | None:
        # a country's holidays are computed a year at a time on first use, into a shared
        # dict: one thread at a time (a backfill lists occurrences off the event loop)
        with _HOLIDAYS_LOCK:
            name = _holidays(self.country, self.subdiv).get(wall.date())
        return None if name is None else str(name)


CalendarRule = DateRule | RangeRule | WeekdaysRule | CronWindowRule | HolidaysRule


@dataclass(frozen=True, slots=True)
class Calendar:
    """A tenant's named exclusion calendar."""

    name: str
    rules: tuple[CalendarRule, ...]
    description: str = ""

    def excludes(self, instant: datetime, zone: ZoneInfo) -> str | None:
        """Why ``instant`` (aware) is excluded on the wall clock of ``zone`` — the first rule
        that matches, as text (``2026-12-25``, ``sat``, ``Christmas Day``) — else None."""
        wall = instant.astimezone(zone)
        for rule in self.rules:
            why = rule.matches(wall)
            if why is not None:
                return why
        return None

    @property
    def document(self) -> list[dict[str, Any]]:
        """The rules as the JSON list :func:`parse_rules` reads (stored, and shown by the API)."""
        return [rule_document(rule) for rule in self.rules]


@dataclass(frozen=True, slots=True)
class Exclusion:
    """Which calendar excludes an instant, and why."""

    calendar: str
    why: str


def exclusion(instant: datetime, zone: ZoneInfo, calendars: Sequence[Calendar]) -> Exclusion | None:
    """The first of ``calendars`` (in the job's order) that excludes ``instant``, else None."""
    for calendar in calendars:
        why = calendar.excludes(instant, zone)
        if why is not None:
            return Exclusion(calendar.name, why)
    return None


def shift_occurrence(
    instant: datetime, zone: ZoneInfo, calendars: Sequence[Calendar], shift: CalendarShift
) -> datetime | None:
    """``instant`` moved by whole days, keeping its wall time in ``zone``, to the nearest day
    after it (``next_business_day``) or before it (``previous_business_day``) on which no
    calendar excludes that wall time; None if none within :data:`MAX_SHIFT_DAYS`. A wall time
    that does not exist on the new day (a DST gap) is read as ``zoneinfo`` reads it (shifted by
    the gap). Returns UTC."""
    step = timedelta(days=1 if shift is CalendarShift.NEXT_BUSINESS_DAY else -1)
    wall = instant.astimezone(zone).replace(tzinfo=None)
    for _ in range(MAX_SHIFT_DAYS):
        wall += step
        moved = wall.replace(tzinfo=zone)
        if exclusion(moved, zone, calendars) is None:
            return moved.astimezone(UTC)
    return None


MAX_JOB_CALENDARS = 20


def calendar_fields(names: object, shift: object) -> dict[str, Any]:
    """A job's validated ``calendars`` (names, in order, each once) and ``calendar_shift``
    (a :class:`CalendarShift` value or None; it needs calendars)."""
    if isinstance(names, str) or not isinstance(names, Sequence):
        raise ValidationError("calendars", "must be a list of calendar names")
    if len(names) > MAX_JOB_CALENDARS:
        raise ValidationError("calendars", f"at most {MAX_JOB_CALENDARS} calendars")
    checked = tuple(dict.fromkeys(check_name(n, "calendars") for n in names))
    if shift is None:
        return {"calendars": checked, "calendar_shift": None}
    try:
        value = CalendarShift(str(shift))
    except ValueError:
        raise ValidationError(
            "calendar_shift",
            f"must be one of {', '.join(s.value for s in CalendarShift)} (or none), got {shift!r}",
        ) from None
    if not checked:
        raise ValidationError(
            "calendar_shift", "moves occurrences that calendars exclude: name calendars too"
        )
    return {"calendars": checked, "calendar_shift": str(value)}


# --- the JSON form ------------------------------------------------------------------------------


def parse_rules(raw: object, field: str = "rules") -> tuple[CalendarRule, ...]:
    """The rules of a calendar from their JSON form (module docstring). A bad rule raises
    ``ValidationError`` naming it (``rules[2].weekdays``)."""
    if not isinstance(raw, list | tuple) or not raw:
        raise ValidationError(field, "must be a non-empty list of rules")
    if len(raw) > MAX_RULES:
        raise ValidationError(field, f"must have at most {MAX_RULES} rules")
    return tuple(_rule(item, f"{field}[{i}]") for i, item in enumerate(raw))


def check_name(name: object, field: str = "name") -> str:
    if not isinstance(name, str) or not CALENDAR_NAME.fullmatch(name):
        raise ValidationError(
            field,
            "a calendar name is 1-64 letters, digits, '.', '_' or '-', starting with a letter "
            f"or digit, got {name!r}",
        )
    return name


def rule_document(rule: CalendarRule) -> dict[str, Any]:
    if isinstance(rule, DateRule):
        return {"date": str(rule.day)}
    if isinstance(rule, RangeRule):
        return {"from": str(rule.first), "to": str(rule.last)}
    if isinstance(rule, WeekdaysRule):
        return {"weekdays": [WEEKDAYS[d] for d in sorted(rule.days)]}
    if isinstance(rule, CronWindowRule):
        return {"cron": rule.cron}
    document: dict[str, Any] = {"holidays": rule.country}
    if rule.subdiv is not None:
        document["subdiv"] = rule.subdiv
    return document


_RULE_KEYS = {
    "date": {"date"},
    "from": {"from", "to"},
    "weekdays": {"weekdays"},
    "cron": {"cron"},
    "holidays": {"holidays", "subdiv"},
}


def _rule(item: object, where: str) -> CalendarRule:
    if not isinstance(item, Mapping):
        raise ValidationError(
            where, "a rule is an object: date, from/to, weekdays, cron or holidays"
        )
    kinds = [k for k in _RULE_KEYS if k in item]
    if len(kinds) != 1:
        raise ValidationError(
            where, "a rule has exactly one of 'date', 'from' (with 'to'), 'weekdays', 'cron', "
            "'holidays'"
        )  # fmt: skip
    kind = kinds[0]
    unknown = sorted(set(item) - _RULE_KEYS[kind])
    if unknown:
        raise ValidationError(f"{where}.{unknown[0]}", f"is not a field of a '{kind}' rule")
    if kind == "date":
        return DateRule(_date(item["date"], f"{where}.date"))
    if kind == "from":
        if "to" not in item:
            raise ValidationError(f"{where}.to", "a range needs 'to' (its last day, included)")
        first, last = _date(item["from"], f"{where}.from"), _date(item["to"], f"{where}.to")
        if last < first:
            raise ValidationError(f"{where}.to", f"must not be before 'from' ({first})")
        return RangeRule(first, last)
    if kind == "weekdays":
        return WeekdaysRule(_weekdays(item["weekdays"], f"{where}.weekdays"))
    if kind == "cron":
        return CronWindowRule(_cron(item["cron"], f"{where}.cron"))
    return _holidays_rule(item["holidays"], item.get("subdiv"), where)


def _date(value: object, where: str) -> date:
    if isinstance(value, date) and not isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value)
        except ValueError:
            pass
    raise ValidationError(where, f"must be a date as YYYY-MM-DD, got {value!r}")


def _weekdays(value: object, where: str) -> frozenset[int]:
    if not isinstance(value, list | tuple) or not value:
        raise ValidationError(where, f"must be a non-empty list of {', '.join(WEEKDAYS)}")
    days: set[int] = set()
    for day in value:
        name = day.strip().lower()[:3] if isinstance(day, str) else None
        if name not in WEEKDAYS:
            raise ValidationError(
                where, f"{day!r} is not a day of the week ({', '.join(WEEKDAYS)})"
            )
        days.add(WEEKDAYS.index(name))
    return frozenset(days)


def _cron(value: object, where: str) -> str:
    if not isinstance(value, str) or len(value.split()) != 5:
        raise ValidationError(
            where, "must be a 5-field cron expression (minute hour dom month dow)"
        )
    try:
        parse_cron(value)
    except ValidationError as exc:
        raise ValidationError(where, exc.reason) from None
    return value


def _holidays_rule(country: object, subdiv: object, where: str) -> HolidaysRule:
    import holidays

    supported = holidays.list_supported_countries()
    if not isinstance(country, str) or country.upper() not in supported:
        raise ValidationError(
            f"{where}.holidays",
            f"{country!r} is not a country the holidays package knows (ISO 3166 alpha-2, "
            "e.g. 'US', 'GB', 'DE')",
        )
    code = country.upper()
    if subdiv is None:
        return HolidaysRule(code)
    if not isinstance(subdiv, str) or subdiv.upper() not in {s.upper() for s in supported[code]}:
        known = ", ".join(supported[code][:12]) or "none"
        raise ValidationError(
            f"{where}.subdiv", f"{subdiv!r} is not a subdivision of {code} (e.g. {known})"
        )
    return HolidaysRule(code, subdiv.upper())


@functools.lru_cache(maxsize=256)
def _holidays(country: str, subdiv: str | None) -> Mapping[date, str]:
    import holidays

    return holidays.country_holidays(country, subdiv=subdiv)


@functools.lru_cache(maxsize=4096)
def _cron_matches(cron: str, minute: datetime) -> bool:
    """Whether a naive wall-clock minute is one ``cron`` (read in UTC: no DST) fires on."""
    at = minute.replace(tzinfo=UTC)
    return parse_cron(cron).next_after(at - timedelta(microseconds=1)) == at
