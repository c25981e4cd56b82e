"""What the budget's pairs would have found in recorded runs: for every server's timing files,
the adjacent decode cycles of which one was timed and the other not (the A/B off blocks left
out), the timed one's start-to-start period minus the untimed one's, in % of the untimed
runs' median period; the median, its standard error from the median absolute deviation (as
the runtime computes it) and the one-sided 95 % bound the controller would use.

    python bench/gpu/pairs_replay.py DIR [DIR...]

DIR: a run folder or a folder of them (an unpacked bench/results/*_runs.tgz); each file
phase-timing.rank*.jsonl under a timing/ folder beside a summary.json is one server.
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from patchkit.timing.phase_timer import _BUDGET_PAIR_Z as Z  # the runtime's own bound


def decode_periods(path: Path) -> list[tuple[int, int, bool]]:
    """(index, ns start to start, timed) of each decode cycle followed by a decode cycle."""
    cycles = []
    with path.open() as fh:
        for line in fh:
            if '"kind":"cycle"' in line:
                cycles.append(json.loads(line))
    cycles.sort(key=lambda c: c["cycle"])
    out = []
    for a, b in itertools.pairwise(cycles):
        if b["cycle"] != a["cycle"] + 1 or "off" in (a.get("ab"), b.get("ab")):
            continue
        if (a.get("attrs") or {}).get("kind") != "decode" or (b.get("attrs") or {}).get("kind") != "decode":
            continue
        out.append((a["cycle"], b["t0"] - a["t0"], a.get("timed") is not False))
    return out


def pairs_of(rows: list[tuple[int, int, bool]]) -> list[int]:
    return [
        (p - q) if t else (q - p)
        for (i, p, t), (j, q, s) in itertools.pairwise(rows)
        if j == i + 1 and t != s
    ]


def bound(pairs: list[float]) -> tuple[float, float, float]:
    median = statistics.median(pairs)
    mad = statistics.median(abs(x - median) for x in pairs)
    se = 1.2533 * 1.4826 * mad / math.sqrt(len(pairs))
    return median, se, max(0.0, median + Z * se)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    print("server | pairs | median % | se | bound % | untimed period ms")
    for root in map(Path, argv):
        for f in sorted(root.rglob("phase-timing.rank*.jsonl")):
            if f.parent.name != "timing" or not (f.parent.parent / "summary.json").exists():
                continue
            rows = decode_periods(f)
            untimed = [p for _, p, t in rows if not t]
            pairs = pairs_of(rows)
            name = str(f.parent.parent.relative_to(root))
            if len(pairs) < 2 or not untimed:
                print(f"{name} | {len(pairs)} | - | - | - | -")
                continue
            ref = statistics.median(untimed)
            m, se, ub = bound(pairs)
            print(
                f"{name} | {len(pairs)} | {100 * m / ref:+.2f} | {100 * se / ref:.2f} | {100 * ub / ref:.2f} | {ref / 1e6:.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
