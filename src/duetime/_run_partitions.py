"""The partition counts of the opt-in hash-partitioned run layout (pure; docs/decisions/0033).

PostgreSQL's ``runs`` may be partitioned by the job partition key every run carries (0-255)
into a power-of-two number of partitions, each holding an equal range of keys
(``store/postgres/hash_layout.py``; ``duetime migrate --hash-partitions N``).
"""

from __future__ import annotations

from duetime.errors import ValidationError

RUN_PARTITION_COUNTS = (2, 4, 8, 16, 32, 64)
"""The partition counts offered: powers of two dividing the 256 job partition keys, so each
partition holds an equal range of keys."""


def check_run_partitions(count: int) -> int:
    """``count`` if it is one of :data:`RUN_PARTITION_COUNTS`; else ValidationError (field
    ``hash_partitions``) naming the counts offered."""
    if count not in RUN_PARTITION_COUNTS:
        allowed = ", ".join(str(c) for c in RUN_PARTITION_COUNTS)
        raise ValidationError("hash_partitions", f"must be one of {allowed}, not {count}")
    return count
