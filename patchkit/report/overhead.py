"""The timer's overhead from PATCHKIT_TIMER_AB runs: timed blocks against off blocks.

The runtime alternates blocks of N cycles timed (ab "events") and untimed but for each
cycle's host start and end (ab "off"). A cycle's period is the host time from its start to
the next cycle's start, so it holds everything the timer adds (the per-cycle write and the
resolution of device times too). Within one process, each timed block is paired with the
off block right after it: overhead = (median period timed - median period off) / median
period off, in percent. Periods are taken only between cycles of one block, of the kind
the report describes first (decode when there is one). With PATCHKIT_TIMER_AB_B=bare the off
blocks record only each cycle's start (`off_blocks`: "bare"), so the pairs also hold what
recording a cycle costs.
"""

from __future__ import annotations

import itertools

from patchkit.report.kinds import cycle_kind
from patchkit.report.stats import percentile

BASIS = "cycle period (host start to next cycle's start)"


def _block_periods(proc, n: int, kind: str | None) -> dict[int, tuple[str, list[int]]]:
    cycles = sorted(proc.cycles, key=lambda c: c["cycle"])
    blocks: dict[int, tuple[str, list[int]]] = {}
    for a, b in itertools.pairwise(cycles):
        if b["cycle"] != a["cycle"] + 1 or a["cycle"] // n != b["cycle"] // n:
            continue
        if kind is not None and cycle_kind(a) != kind:
            continue
        label = a.get("ab") or "events"
        blocks.setdefault(a["cycle"] // n, (label, []))[1].append(b["t0"] - a["t0"])
    return blocks


def _median(values: list[int]) -> float:
    """The median of a non-empty list."""
    got = percentile(values, 50)
    assert got is not None, "a non-empty list"
    return got


def paired_overhead(procs, kind: str | None) -> dict | None:
    """summary.json `overhead`, or None when no process ran with PATCHKIT_TIMER_AB."""
    ab_procs = [p for p in procs if p.header.get("ab_cycles")]
    if not ab_procs:
        return None
    pcts: list[float] = []
    timed_all: list[int] = []
    off_all: list[int] = []
    sizes = set()
    for proc in ab_procs:
        n = int(proc.header["ab_cycles"])
        sizes.add(n)
        blocks = _block_periods(proc, n, kind)
        for index, (label, periods) in sorted(blocks.items()):
            following = blocks.get(index + 1)
            if label != "events" or not following or following[0] != "off" or not periods or not following[1]:
                continue
            timed, off = _median(periods), _median(following[1])
            if off > 0:
                pcts.append(100.0 * (timed - off) / off)
                timed_all += periods
                off_all += following[1]
    return {
        "ab_cycles": sorted(sizes)[0] if len(sizes) == 1 else sorted(sizes),
        "kind": kind,
        "basis": BASIS,
        "pairs": len(pcts),
        "median_pct": percentile(pcts, 50),
        "iqr_pct": [percentile(pcts, 25), percentile(pcts, 75)] if pcts else None,
        "mean_pct": sum(pcts) / len(pcts) if pcts else None,
        "pairs_pct": [round(p, 3) for p in pcts],  # each pair, in cycle order: pool runs with these
        "timed_period_ms": _median(timed_all) / 1e6 if timed_all else None,
        "off_period_ms": _median(off_all) / 1e6 if off_all else None,
        "off_cycles": sum(1 for p in ab_procs for c in p.cycles if c.get("ab") == "off"),
        # PATCHKIT_TIMER_AB_B=bare: the off blocks recorded cycle starts only
        "off_blocks": "bare" if all(p.header.get("ab_b") == "bare" for p in ab_procs) else "off",
    }
