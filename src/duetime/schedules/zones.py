"""Time zones, and the mapping between local wall-clock time and UTC instants.

Pure functions (loading a zone reads the tz database once; it is cached). Zones come from the
``tzdata`` package (``tzdb.py``), never from the host's files. All instants returned
are timezone-aware ``datetime`` objects in UTC. A *wall time* is a naive ``datetime`` read as a
local clock reading in some zone; its ``fold`` attribute is ignored.

Around a DST change a wall time is one of three kinds (:class:`WallKind`):

- ``NORMAL``: it happens exactly once.
- ``GAP``: it never happens (the clock jumps over it when DST starts, e.g. 02:30 in New York on
  the spring-forward day).
- ``FOLD``: it happens twice (the clock is set back when DST ends, e.g. 01:30 in New York on
  the fall-back day); the first pass is ``fold=0``, the second ``fold=1``.
"""

from __future__ import annotations

import enum
import functools
import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from duetime.errors import ValidationError
from duetime.schedules import tzdb

__all__ = [
    "WallKind",
    "load_zone",
    "next_transition",
    "require_aware",
    "to_utc",
    "transition_between",
    "wall_instants",
    "wall_kind",
    "wall_readings",
    "wall_to_instant",
]

# Names the zoneinfo module resolves from the host's files but that are not IANA zones: their
# meaning depends on the machine (``localtime``) or they count leap seconds (``right/…``), which
# would break every computation here.
_HOST_ONLY_NAMES = frozenset({"localtime", "posixrules", "Factory"})
_HOST_ONLY_PREFIXES = ("right/", "posix/")


class WallKind(enum.Enum):
    """How often a wall time happens in a zone (see the module docstring)."""

    NORMAL = "normal"
    GAP = "gap"
    FOLD = "fold"


def dst_note(kind: WallKind, walls: Sequence[datetime]) -> str | None:
    """A preview's note on an occurrence whose wall time ``walls`` (the local times asked for,
    in the zone) a DST change moved (``GAP``) or doubled (``FOLD``: the first pass fires);
    None for a normal one."""
    if kind is WallKind.GAP:
        shown = ", ".join(w.strftime("%H:%M:%S" if w.second else "%H:%M") for w in walls)
        return f"moved from {shown} (DST gap)"
    if kind is WallKind.FOLD:
        return "first of a repeated hour"
    return None


def load_zone(name: str) -> ZoneInfo:
    """Return the IANA time zone ``name`` (e.g. ``"Europe/London"``, ``"UTC"``).

    Names are case-sensitive, as in the tz database. Raises
    ``ValidationError("tz", "unknown time zone 'Mars/Base'")`` for an empty, malformed or
    unknown name, for host-specific names (``localtime``, ``right/…``) and for anything but a
    string (checked before the cache, which could not hash a list).
    """
    if not isinstance(name, str):
        raise ValidationError("tz", f"unknown time zone {name!r}")
    return _load_zone(name)


@functools.lru_cache(maxsize=1024)
def _load_zone(name: str) -> ZoneInfo:
    if (
        not name
        or name != name.strip()
        or name in _HOST_ONLY_NAMES
        or name.startswith(_HOST_ONLY_PREFIXES)
    ):
        raise ValidationError("tz", f"unknown time zone {name!r}")
    zone = tzdb.current().load(name)  # the tzdata package's rules, never the host's
    if zone is None:
        raise ValidationError("tz", f"unknown time zone {name!r}")
    return zone


tzdb.on_change(_load_zone.cache_clear)


def require_aware(value: datetime, what: str = "datetime") -> None:
    """Raise ``ValueError`` unless ``value`` is timezone-aware (has a UTC offset)."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{what} must be timezone-aware, got naive {value.isoformat()}")


def to_utc(value: datetime, what: str = "datetime") -> datetime:
    """Return the aware ``value`` as the same instant in UTC; ``ValueError`` if it is naive."""
    require_aware(value, what)
    return value.astimezone(UTC)


def wall_readings(wall: datetime, zone: ZoneInfo) -> tuple[datetime, datetime]:
    """UTC instants of ``wall`` read with ``fold=0`` and with ``fold=1`` (PEP 495).

    Equal for a normal wall time. In a fold, the first is the earlier (first pass). In a gap,
    ``fold=0`` uses the offset from before the change and ``fold=1`` the one after, so the
    first is the *later* instant.
    """
    naive = wall.replace(tzinfo=None)
    first = naive.replace(tzinfo=zone, fold=0).astimezone(UTC)
    second = naive.replace(tzinfo=zone, fold=1).astimezone(UTC)
    return first, second


def wall_kind(wall: datetime, zone: ZoneInfo) -> WallKind:
    """Whether ``wall`` happens once, never (gap) or twice (fold) in ``zone``."""
    first, second = wall_readings(wall, zone)
    if first == second:
        return WallKind.NORMAL
    return WallKind.FOLD if first < second else WallKind.GAP


def transition_between(zone: ZoneInfo, lo: datetime, hi: datetime) -> datetime:
    """The first instant in ``(lo, hi]`` at which ``zone``'s UTC offset differs from the offset
    at ``lo``, to the second (tz transitions fall on whole seconds).

    Precondition: ``lo < hi`` (aware) and the offsets at ``lo`` and ``hi`` differ. Returns UTC.
    """
    lo_s = math.floor(lo.timestamp())
    hi_s = math.ceil(hi.timestamp())
    base = datetime.fromtimestamp(lo_s, UTC).astimezone(zone).utcoffset()
    while hi_s - lo_s > 1:
        mid = (lo_s + hi_s) // 2
        if datetime.fromtimestamp(mid, UTC).astimezone(zone).utcoffset() == base:
            lo_s = mid
        else:
            hi_s = mid
    return datetime.fromtimestamp(hi_s, UTC)


def next_transition(zone: ZoneInfo, after: datetime, within: timedelta) -> datetime | None:
    """The first offset change of ``zone`` in ``(after, after + within]``, or None.

    Only the offsets at both ends are compared, so ``within`` must be shorter than the time
    between two transitions (hours, not months). Returns UTC.
    """
    after = to_utc(after, "after")
    end = after + within
    if after.astimezone(zone).utcoffset() == end.astimezone(zone).utcoffset():
        return None
    return transition_between(zone, after, end)


def wall_to_instant(wall: datetime, zone: ZoneInfo) -> tuple[datetime, WallKind]:
    """Map a wall time to ONE instant by the fixed-time rule (cronie's), with its kind.

    - normal: its instant;
    - gap: the end of the gap, i.e. the transition instant (New York 02:30 on the
      spring-forward day → 03:00 EDT = 07:00Z);
    - fold: its first occurrence (``fold=0``).

    The mapping is monotone non-decreasing in ``wall``: several gap times map to one instant.
    """
    first, second = wall_readings(wall, zone)
    if first == second:
        return first, WallKind.NORMAL
    if first < second:
        return first, WallKind.FOLD
    # Gap: `second` (offset after the change) is before the transition, `first` at or after it.
    return transition_between(zone, second, first), WallKind.GAP


def wall_instants(wall: datetime, zone: ZoneInfo) -> tuple[datetime, ...]:
    """Map a wall time to every instant at which the clock shows it (the real-time rule).

    ``()`` for a gap time, one instant for a normal one, two (first pass, second pass) in a fold.
    """
    first, second = wall_readings(wall, zone)
    if first == second:
        return (first,)
    if first < second:
        return (first, second)
    return ()
