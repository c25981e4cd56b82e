"""The timer's overhead from PATCHKIT_TIMER_AB runs: timed blocks against off blocks.

The runtime alternates blocks of N cycles timed (ab "events") and untimed but for each
cycle's host start and end (ab "off"). A cycle's period is the host time from its start to
the next cycle's start, so it holds everything the timer adds (the per-cycle write and the
resolution of device times too). Within one process, each timed block is compared with the
mean of the two off blocks around it: overhead = (median period timed - mean of the two off
blocks' median periods) / that mean, in percent. Both neighbours, not only the next one: the
period drifts during a run (a decode cycle slows as the sequences grow), and a timed block
against the block after it alone reads that drift as overhead, negative while cycles slow
down (v1 on the H200: -1.57 % against the next off block, +2.17 % against the one before, the
same run); the mean of both sides cancels a steady drift. Periods are taken only between
cycles of one block, of the kind the report describes first (decode when there is one). With
PATCHKIT_TIMER_AB_B=bare the off blocks record only each cycle's start (`off_blocks`:
"bare"), so the pairs also hold what recording a cycle costs. `blocks` keeps every block's
median period, so that other estimators can be computed from summary.json.
"""

from __future__ import annotations

import itertools
from statistics import median  # of lists never empty here

from patchkit.report.kinds import cycle_kind
from patchkit.report.stats import percentile

BASIS = "cycle period (host start to next cycle's start)"
PAIRING = "each timed block against the mean of the off blocks before and after it"


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


def paired_overhead(procs, kind: str | None) -> dict | None:
    """summary.json `overhead`, or None when no process ran with PATCHKIT_TIMER_AB."""
    ab_procs = [p for p in procs if p.header.get("ab_cycles")]
    if not ab_procs:
        return None
    pcts: list[float] = []
    timed_all: list[int] = []
    off_all: list[int] = []
    sizes = set()
    medians: list[list] = []
    for proc in ab_procs:
        n = int(proc.header["ab_cycles"])
        sizes.add(n)
        blocks = _block_periods(proc, n, kind)
        med = {i: (label, median(periods)) for i, (label, periods) in blocks.items() if periods}
        pid = proc.header.get("pid")
        medians += [[proc.rank, pid, i, label, round(m)] for i, (label, m) in sorted(med.items())]
        for index, (label, timed) in sorted(med.items()):
            before, after = med.get(index - 1), med.get(index + 1)
            if label != "events" or not before or not after or before[0] != "off" or after[0] != "off":
                continue
            off = (before[1] + after[1]) / 2
            if off > 0:
                pcts.append(100.0 * (timed - off) / off)
                timed_all += blocks[index][1]
                off_all += blocks[index - 1][1] + blocks[index + 1][1]
    return {
        "ab_cycles": sorted(sizes)[0] if len(sizes) == 1 else sorted(sizes),
        "kind": kind,
        "basis": BASIS,
        "pairing": PAIRING,
        "pairs": len(pcts),
        "median_pct": percentile(pcts, 50),
        "iqr_pct": [percentile(pcts, 25), percentile(pcts, 75)] if pcts else None,
        "mean_pct": sum(pcts) / len(pcts) if pcts else None,
        "pairs_pct": [round(p, 3) for p in pcts],  # each pair, in cycle order: pool runs with these
        "timed_period_ms": median(timed_all) / 1e6 if timed_all else None,
        "off_period_ms": median(off_all) / 1e6 if off_all else None,
        "off_cycles": sum(1 for p in ab_procs for c in p.cycles if c.get("ab") == "off"),
        # PATCHKIT_TIMER_AB_B=bare: the off blocks recorded cycle starts only
        "off_blocks": "bare" if all(p.header.get("ab_b") == "bare" for p in ab_procs) else "off",
        "blocks": medians,  # [rank, pid, block index, "events" | "off", median period ns]
    }
