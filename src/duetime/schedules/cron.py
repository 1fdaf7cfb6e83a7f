"""Cron expressions: duetime's grammar on top of the ``cronsim`` library, and cronie's DST rule.

Grammar (SPEC §1):

- 5 fields ``minute hour day-of-month month day-of-week``, or 6 with a LEADING seconds field
  (Spring style). Other counts are refused.
- Numbers, ``*``, lists ``a,b``, ranges ``a-b``, steps ``*/n``, ``a/n``, ``a-b/n``. Names
  ``JAN``–``DEC`` and ``SUN``–``SAT``, case-insensitive. Day-of-week 0–7, 0 and 7 = Sunday.
- Day-of-month: ``L`` (last day), ``LW`` (last weekday), ``nW`` (the weekday nearest day n,
  within the month: ``1W`` on a Saturday is Monday the 3rd, ``31W`` on a Sunday is Friday the
  29th; in a month without day n it does not fire, like a plain ``n``).
- Day-of-week: ``nL`` (last weekday n of the month, ``5L`` = last Friday), ``n#k`` (k-th weekday
  n, ``MON#1``).
- ``?`` means ``*`` and is allowed, alone, in the two day fields only.
- ``H`` (hashed, Jenkins style) in the seconds, minute and hour fields only: ``H`` is one value
  of the field's range, ``H(a-b)`` one value of ``a-b``, ``H/n`` every ``n`` from a hashed
  offset below ``n``, ``H(a-b)/n`` the same within ``a-b`` (also as list items). The value is
  taken from ``sha256(seed U+001F field U+001F item index)``: a job's seed is its tenant and name
  (``Schedule.hash_seed``), a bare expression's is its own text — never Python's ``hash()``, so
  every process and release agrees. An ``H`` field is fixed-time for the DST rule.
- Aliases ``@yearly`` ``@annually`` ``@monthly`` ``@weekly`` ``@daily`` ``@midnight``
  ``@hourly``.
- Day matching follows Vixie cron: when day-of-month and day-of-week are both restricted (neither
  starts with ``*``; ``?`` counts as ``*``) a day matches if EITHER does, otherwise both must.

What cronsim lacks (``?``, aliases, ``nW``, ``H``) is added around it: text is pre-processed
field by field (:func:`_normalize_field`, where ``H`` is expanded), ``nW`` is matched by a
subclass. cronsim only ever iterates *naive wall-clock time* here; the time zone and DST are
applied by this module (see :class:`CronExpression`).

DST rule (cronie's): a *wildcard* job — its seconds (6-field only), minute or hour field starts
with ``*`` — follows real time: a wall time skipped by a DST change is absent and a repeated one
fires twice. A *fixed-time* job fires a skipped wall time once, at the end of the gap, and a
repeated wall time once, at its first occurrence; wall times landing on one instant fire once.
"""

from __future__ import annotations

import calendar
import copy
import functools
import hashlib
import heapq
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Final, cast
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError
from cronsim.cronsim import RANGES, SYMBOLIC_DAYS, SYMBOLIC_MONTHS, Field

from duetime._types import Occurrence, cron_uses_hash
from duetime.errors import ValidationError
from duetime.schedules import tzdb
from duetime.schedules.zones import (
    WallKind,
    dst_note,
    load_zone,
    next_transition,
    to_utc,
    wall_readings,
    wall_to_instant,
)

__all__ = ["ALIASES", "FIELD_NAMES", "CronExpression", "parse_cron"]

FIELD_NAMES: Final = ("second", "minute", "hour", "day-of-month", "month", "day-of-week")
"""Names of the six normalized fields, as used in error messages."""

ALIASES: Final = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
"""Cron aliases and the 5-field expressions they stand for."""

_SECOND, _MINUTE, _HOUR, _DOM, _MONTH, _DOW = range(6)
_MAX_LENGTH = 1024
_NEAREST_WEEKDAY = re.compile(r"([0-9]+)W")
_HASHED = re.compile(r"H(?:\(([0-9]+)-([0-9]+)\))?(?:/([0-9]+))?")
_HASH_FORMS = "H, H(a-b), H/n or H(a-b)/n"
_FIELD_COUNT_HELP = (
    "expected 5 (minute hour day-of-month month day-of-week) or 6 (with leading seconds)"
)
_MONTH_NAMES = tuple(calendar.month_name)
# How far ahead a wildcard job looks for the clock being set back. Folds in the tz database
# since 1970 reach 3 h (Antarctica/Casey, yearly until 2023) and once 7 h (Antarctica/Vostok,
# 1994); a day covers them all and costs nothing unless a transition is that close.
_FOLD_LOOKAHEAD = timedelta(days=1)
# Arbitrary start for the template iterator; every use sets its own start.
_TEMPLATE_START = datetime(2000, 1, 1)


def _ascii_int(text: str) -> int | None:
    return int(text) if text and text.isascii() and text.isdecimal() else None


def _fail(index: int, shown: str, reason: str) -> ValidationError:
    return ValidationError("cron", f"{FIELD_NAMES[index]} field {shown!r} is invalid: {reason}")


# --- pre-processing ------------------------------------------------------------------------------


def _split_fields(expr: str) -> tuple[list[str], bool]:
    """Expand an alias and split into fields; return (fields as written, has_seconds)."""
    if expr.startswith("@"):
        alias = ALIASES.get(expr.lower())
        if alias is None:
            names = ", ".join(ALIASES)
            raise ValidationError("cron", f"unknown alias {expr!r}; expected one of {names}")
        expr = alias
    parts = expr.split()
    if len(parts) not in (5, 6):
        noun = "field" if len(parts) == 1 else "fields"
        raise ValidationError("cron", f"{len(parts)} {noun} given; {_FIELD_COUNT_HELP}")
    return parts, len(parts) == 6


def hashed_value(seed: str, index: int, item: int) -> int:
    """The stable 64-bit number ``H`` item ``item`` of field ``index`` draws from ``seed``."""
    text = f"{seed}\x1f{FIELD_NAMES[index]}\x1f{item}".encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "big")


def _expand_hash(index: int, term: str, shown: str, seed: str, item: int) -> str:
    """One ``H`` list item (upper case) of field ``index`` → a plain cron term."""
    match = _HASHED.fullmatch(term)
    if match is None:
        raise _fail(index, shown, f"{term!r}: H takes the forms {_HASH_FORMS}")
    rng = RANGES[index]
    low, high = rng[0], rng[-1]
    if match[1] is not None:
        low, high = int(match[1]), int(match[2])
        for bound in (low, high):
            if bound not in rng:
                raise _fail(index, shown, f"{term!r}: {bound} is out of range {rng[0]}-{rng[-1]}")
        if low > high:
            raise _fail(index, shown, f"{term!r}: range {low}-{high} runs backwards")
    h = hashed_value(seed, index, item)
    if match[3] is None:
        return str(low + h % (high - low + 1))
    step = int(match[3])
    if step < 1:
        raise _fail(index, shown, f"{term!r}: step must be at least 1")
    start = low + h % min(step, high - low + 1)
    return f"{start}-{high}/{step}"


def _normalize_field(index: int, value: str, seed: str | None = None) -> str:
    """Rewrite one field (as written) into the syntax cronsim and :class:`_WallClock` accept.

    This is THE place for syntax cronsim lacks: ``?`` becomes ``*`` and ``H`` items are
    expanded with ``seed`` (list items keep their positions, so errors can quote them).
    """
    upper = value.upper()
    terms = upper.split(",")
    hashed = [i for i, t in enumerate(terms) if t.startswith("H")]  # no name starts with H
    if hashed:
        if index not in (_SECOND, _MINUTE, _HOUR):
            raise _fail(index, value, "'H' is only allowed in the second, minute and hour fields")
        for i in hashed:
            terms[i] = _expand_hash(index, terms[i], value, seed or "", i)
        upper = ",".join(terms)
    if "?" in upper:
        if index not in (_DOM, _DOW):
            raise _fail(
                index, value, "'?' is only allowed in the day-of-month and day-of-week fields"
            )
        if upper != "?":
            raise _fail(index, value, "'?' must stand alone")
        return "*"
    return upper


def _value_problem(index: int, text: str) -> str | None:
    """Why a single value (number or name) is invalid in field ``index``; None if it is fine."""
    rng = RANGES[index]
    number = _ascii_int(text)
    if number is not None:
        if number not in rng:
            return f"{number} is out of range {rng[0]}-{rng[-1]}"
        return None
    name = text.upper()
    if (index == _MONTH and name in SYMBOLIC_MONTHS) or (index == _DOW and name in SYMBOLIC_DAYS):
        return None
    if text == "":
        return "a number is missing"
    if text.isalpha() and index in (_MONTH, _DOW):
        return f"unknown {FIELD_NAMES[index]} name {text!r}"
    return f"{text!r} is not a number"


def _term_problem(index: int, term: str) -> str:
    """Why one comma-separated term (as written) that cronsim refused is invalid (best effort,
    for humans)."""
    if term == "":
        return "empty list item"
    base = term
    if "/" in base:
        base, _, step = base.partition("/")
        step_value = _ascii_int(step)
        if step_value is None:
            return f"step {step!r} is not a whole number"
        if step_value == 0:
            return "step must be at least 1"
    if index == _DOW and "#" in base:
        base, _, nth = base.partition("#")
        nth_value = _ascii_int(nth)
        if nth_value is None or not 1 <= nth_value <= 5:
            return f"'#{nth}' must be #1 to #5"
    elif index == _DOW and base.upper().endswith("L"):
        base = base[:-1]
        if _ascii_int(base) is None:
            return f"{term!r}: 'nL' takes a day number, e.g. 5L (last Friday)"
    if base == "*" or (index == _DOM and base.upper() in ("L", "LW")):
        return f"{term!r} is not understood"
    bounds = base.split("-", 1)
    for bound in bounds:
        problem = _value_problem(index, bound)
        if problem is not None:
            return problem
    if len(bounds) == 2:
        return f"range {base!r} runs backwards"
    return f"{term!r} is not understood"


def _check_field(index: int, value: str, shown: str, written: list[str]) -> None:
    """Raise ValidationError (naming the field) unless the normalized ``value`` is valid.

    ``shown`` is the whole field as written, ``written`` the terms of ``value`` as written.
    """
    try:
        Field(index).parse(value)
    except CronSimError:
        pass
    else:
        return
    for term, as_written in zip(value.split(","), written, strict=True):
        try:
            Field(index).parse(term)
        except CronSimError:
            raise _fail(index, shown, _term_problem(index, as_written)) from None
    raise _fail(index, shown, "not understood")  # pragma: no cover - cronsim refused the list


def _split_day_of_month(value: str, shown: str) -> tuple[list[str], list[str], frozenset[int]]:
    """Split the normalized day-of-month field into the terms cronsim reads (normalized, and as
    written) and the set of ``nW`` days."""
    plain: list[str] = []
    plain_written: list[str] = []
    nearest: set[int] = set()
    written = shown.split(",") if value != "*" else [value]
    for term, as_written in zip(value.split(","), written, strict=True):
        match = _NEAREST_WEEKDAY.fullmatch(term)
        if match is None:
            plain.append(term)
            plain_written.append(as_written)
            continue
        day = _ascii_int(match.group(1))
        if day is None or not 1 <= day <= 31:
            raise _fail(_DOM, shown, f"{as_written!r}: 'nW' takes a day of month 1-31")
        nearest.add(day)
    return plain, plain_written, frozenset(nearest)


# --- the wall-clock iterator ---------------------------------------------------------------------


def _nearest_weekday(year: int, month: int, day: int) -> int | None:
    """The weekday (Mon–Fri) nearest ``day`` within the month (cron's ``nW``), or None if the
    month has no such day. Never crosses into another month."""
    first_weekday, last = calendar.monthrange(year, month)
    if day > last:
        return None
    weekday = (first_weekday + day - 1) % 7  # Monday = 0
    if weekday == 5:  # Saturday: Friday before, unless that is in the previous month
        return day - 1 if day > 1 else day + 2
    if weekday == 6:  # Sunday: Monday after, unless that is in the next month
        return day + 1 if day < last else day - 2
    return day


class _WallClock(CronSim):
    """cronsim, plus ``nW`` in day-of-month; only ever iterated over NAIVE wall-clock time.

    Built by :func:`_compile`; copied (cheaply) for each iteration.
    """

    nearest_weekdays: frozenset[int] = frozenset()

    def match_dom(self, d: date) -> bool:
        if super().match_dom(d):
            return True
        return any(d.day == _nearest_weekday(d.year, d.month, n) for n in self.nearest_weekdays)


def _compile(fields: tuple[str, ...], nearest: frozenset[int], plain_dom: str) -> _WallClock:
    dom = fields[_DOM]
    # cronsim refuses day-of-month sets it cannot satisfy ('0 0 30 2 *') while parsing, and does
    # not know nW: give it a harmless day-of-month, then install the real day set. A schedule
    # that never fires is reported by validation (no occurrence), not as a syntax error.
    placeholder = "*" if dom.startswith("*") else "1"
    sim = _WallClock(" ".join((*fields[:_DOM], placeholder, *fields[_DOM + 1 :])), _TEMPLATE_START)
    sim.days = cast(set[int], Field.DAY.parse(plain_dom)) if plain_dom else set()
    sim.nearest_weekdays = nearest
    sim.day_and = dom.startswith("*") or fields[_DOW].startswith("*")
    return sim


# --- the public type -----------------------------------------------------------------------------


@functools.lru_cache(maxsize=8192)
def _parse_cached(expr: str, tz: str, seed: str | None) -> CronExpression:
    zone = load_zone(tz)
    text = expr.strip()
    if not text:
        raise ValidationError("cron", "expression is empty")
    if len(text) > _MAX_LENGTH:
        raise ValidationError("cron", f"expression is longer than {_MAX_LENGTH} characters")
    written, has_seconds = _split_fields(text)
    if not has_seconds:
        written.insert(0, "0")
    fields = tuple(_normalize_field(i, value, seed) for i, value in enumerate(written))
    dom_terms, dom_written, nearest = _split_day_of_month(fields[_DOM], written[_DOM])
    plain_dom = ",".join(dom_terms)
    for index, value in enumerate(fields):
        if index != _DOM:
            _check_field(index, value, written[index], written[index].split(","))
        elif dom_terms:
            _check_field(index, plain_dom, written[index], dom_written)
    wildcard = (
        (has_seconds and fields[_SECOND].startswith("*"))
        or fields[_MINUTE].startswith("*")
        or fields[_HOUR].startswith("*")
    )
    try:
        sim = _compile(fields, nearest, plain_dom)
    except CronSimError as exc:  # pragma: no cover - every field was checked above
        raise ValidationError("cron", f"invalid expression {text!r}: {exc}") from None
    return CronExpression(text, tz, wildcard, fields, zone, sim, seed)


@dataclass(frozen=True, slots=True)
class CronExpression:
    """A compiled cron expression in a time zone. Immutable, hashable, cheap to reuse.

    Build it with :meth:`parse` (cached). Equality and hash use ``expression``, ``tz`` and
    ``seed`` (None unless the expression has ``H``).

    Occurrences are computed in ``tz`` and returned as aware UTC instants, by the DST rule in
    the module docstring: ``wildcard`` jobs follow real time, fixed-time jobs fire each matching
    wall time exactly once (a skipped one at the end of the gap, a repeated one at its first
    occurrence). Seconds resolution; every result is strictly later than the ``after`` given.
    """

    expression: str
    """The expression as written (surrounding whitespace removed)."""
    tz: str
    """IANA zone name the expression is evaluated in."""
    wildcard: bool = field(compare=False)
    """True if the seconds (6-field only), minute or hour field starts with ``*``."""
    fields: tuple[str, ...] = field(compare=False)
    """Six normalized fields (seconds first; uppercase; aliases expanded; ``?`` → ``*``)."""
    zone: ZoneInfo = field(compare=False, repr=False)
    _template: _WallClock = field(compare=False, repr=False)
    seed: str | None = None
    """What its ``H`` values were drawn from; None when it has no ``H``."""

    @classmethod
    def parse(cls, expr: str, tz: str = "UTC", seed: str | None = None) -> CronExpression:
        """Parse and validate ``expr`` for zone ``tz``; results are cached (LRU).

        ``seed`` is what ``H`` hashes (a job's ``Schedule.hash_seed``); without one an
        expression with ``H`` hashes its own text. It is ignored when there is no ``H``.

        Raises ``ValidationError`` with field ``"tz"`` for an unknown zone, or field ``"cron"``
        with a message naming what is wrong (``"minute field '61' is invalid: 61 is out of range
        0-59"``). An expression that parses but can never fire (``0 0 30 2 *``) is accepted
        here; :meth:`next_after` then returns None.
        """
        if not isinstance(expr, str):
            raise ValidationError("cron", f"must be a string, got {type(expr).__name__}")
        if not isinstance(tz, str):
            raise ValidationError("tz", f"unknown time zone {tz!r}")
        if not cron_uses_hash(expr):
            seed = None
        elif seed is None:
            seed = expr.strip()
        return _parse_cached(expr, tz, seed)

    # -- iteration --------------------------------------------------------------------------------

    def _walls(self, start: datetime) -> Iterator[datetime]:
        """Matching naive wall times strictly after the naive ``start`` (whole seconds)."""
        sim = copy.copy(self._template)
        sim.dt = start.replace(tzinfo=None, microsecond=0, fold=0)
        sim.tick_direction = 1
        sim.skip_initial_tick = False
        try:
            yield from sim  # ends (StopIteration) after 50 years without a match
        except OverflowError:  # walked past year 9999
            return

    def _fixed(self, after: datetime) -> Iterator[tuple[datetime, datetime, WallKind]]:
        """(instant, wall, kind) for a fixed-time job; equal instants repeat (gap merges).

        Wall times are mapped one to one (gap → end of gap, fold → first pass). That mapping is
        monotone, so starting at the wall time of ``after`` and dropping instants <= ``after``
        (only possible within a fold) loses nothing.
        """
        zone = self.zone
        for wall in self._walls(after.astimezone(zone)):
            instant, kind = wall_to_instant(wall, zone)
            if instant > after:
                yield instant, wall, kind

    def _real_time(self, after: datetime) -> Iterator[tuple[datetime, int, datetime]]:
        """(instant, pass, wall) for a wildcard job, strictly increasing; pass is 0 for a normal
        wall time, 1 and 2 for the first and second pass of a repeated one.

        Wall times are visited in order, but the second pass of a repeated wall time comes after
        later wall times' first passes: candidates wait in a heap until no later wall time can
        produce an earlier instant (every instant of wall time w and later is >= the smaller of
        w's two readings).
        """
        zone = self.zone
        start = after.astimezone(zone).replace(tzinfo=None)
        change = next_transition(zone, after, _FOLD_LOOKAHEAD)
        if change is not None:
            # If the clock is set back soon, wall times before `after`'s own can still happen
            # again after it: start at the wall time shown right after the change.
            start = min(start, change.astimezone(zone).replace(tzinfo=None))
        start -= timedelta(seconds=1)  # include `start` itself: its second pass may be > after
        pending: list[tuple[datetime, int, datetime]] = []
        for wall in self._walls(start):
            first, second = wall_readings(wall, zone)
            if first == second:
                if first > after:
                    heapq.heappush(pending, (first, 0, wall))
            elif first < second:
                if first > after:
                    heapq.heappush(pending, (first, 1, wall))
                if second > after:
                    heapq.heappush(pending, (second, 2, wall))
            bound = min(first, second)
            while pending and pending[0][0] <= bound:
                yield heapq.heappop(pending)
        while pending:
            yield heapq.heappop(pending)

    def next_after(self, after: datetime) -> datetime | None:
        """The first fire instant strictly after ``after`` (aware, any zone), as aware UTC.

        None if the expression never fires again (cronsim gives up after 50 years without a
        match). ``ValueError`` if ``after`` is naive.
        """
        return _next_after_cached(self, to_utc(after, "after"))

    def _next_after(self, after: datetime) -> datetime | None:
        try:
            if self.wildcard:
                return next(self._real_time(after))[0]
            return next(self._fixed(after))[0]
        except StopIteration:
            return None
        except OverflowError:
            return None

    def iter_after(self, after: datetime) -> Iterator[Occurrence]:
        """Successive occurrences strictly after ``after`` (aware), strictly increasing.

        Each has its UTC instant, the local time in ``tz`` and a ``dst_note`` when a DST change
        moved it (fixed-time: ``"moved from 02:30 (DST gap)"``, ``"first of a repeated hour"``)
        or doubled it (wildcard: ``"repeated hour (first pass)"`` / ``"(second pass)"``).
        Iterating is the same as calling :meth:`next_after` repeatedly.
        """
        after = to_utc(after, "after")
        zone = self.zone
        try:
            if self.wildcard:
                for instant, pass_, _ in self._real_time(after):
                    yield Occurrence(instant, instant.astimezone(zone), _REAL_TIME_NOTES[pass_])
                return
            # A gap wall time may share its instant (the end of the gap) with later wall times:
            # hold it until the next one is known. Other kinds never share (monotone mapping).
            held: tuple[datetime, list[datetime], WallKind] | None = None
            for instant, wall, kind in self._fixed(after):
                if held is not None:
                    if instant == held[0]:
                        if kind is WallKind.GAP:
                            held[1].append(wall)
                        continue
                    yield _fixed_occurrence(held, zone)
                    held = None
                if kind is WallKind.GAP:
                    held = (instant, [wall], kind)
                else:
                    yield _fixed_occurrence((instant, [wall], kind), zone)
            if held is not None:
                yield _fixed_occurrence(held, zone)
        except OverflowError:
            return

    def never_fires_reason(self) -> str:
        """A human explanation of why this expression never fires (call when it doesn't)."""
        dom, month, dow = self.fields[_DOM], self.fields[_MONTH], self.fields[_DOW]
        days = self._template.days
        plain_days = days | self._template.nearest_weekdays
        if self._template.day_and and plain_days and all(d > 0 for d in plain_days):
            months = sorted(cast(set[int], Field.MONTH.parse(month)))
            longest = max(calendar.monthrange(2000, m)[1] for m in months)  # 2000: leap year
            first_day = min(plain_days)
            if first_day > longest and dow.startswith("*") and "L" not in dom:
                if len(months) == 1:
                    return f"{_MONTH_NAMES[months[0]]} has no {_ordinal(first_day)}"
                return f"none of the chosen months has a {_ordinal(first_day)}"
        return "no occurrence in the next 50 years"


_REAL_TIME_NOTES: Final = (None, "repeated hour (first pass)", "repeated hour (second pass)")


def _fixed_occurrence(
    held: tuple[datetime, list[datetime], WallKind], zone: ZoneInfo
) -> Occurrence:
    instant, walls, kind = held
    return Occurrence(instant, instant.astimezone(zone), dst_note(kind, walls))


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def parse_cron(expr: str, tz: str = "UTC", seed: str | None = None) -> CronExpression:
    """Alias of :meth:`CronExpression.parse`."""
    return CronExpression.parse(expr, tz, seed)


@functools.lru_cache(maxsize=16384)
def _next_after_cached(expression: CronExpression, after: datetime) -> datetime | None:
    """Memo of :meth:`CronExpression.next_after` (pure in expression, zone and instant): bulk
    registration validates and first-fires millions of jobs sharing a few thousand crons at
    one ``now``, and schedulers plan many jobs due at the same instant."""
    return expression._next_after(after)


# parsed expressions hold their zone, and instants were computed with its rules
tzdb.on_change(_parse_cached.cache_clear)
tzdb.on_change(_next_after_cached.cache_clear)
