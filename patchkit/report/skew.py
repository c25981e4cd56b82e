"""Rank skew: per phase, how far the ranks' mean times are apart.

For each phase of the cycles the report describes first (decode when there is one), the
mean time per call on each rank (device time on the device basis, else host time), the
spread max - min of those means, which rank is slowest, and a flag when the spread exceeds
SKEW_FLAG_PCT percent of the mean of the ranks' means. The cycle itself is the first row.
"""

from __future__ import annotations

from patchkit.report.kinds import cycle_kind

SKEW_FLAG_PCT = 10.0


def _row(name, parent, depth, per_rank: dict[int, list[int]]) -> dict | None:
    means = {r: sum(v) / len(v) / 1e6 for r, v in per_rank.items() if v}
    if len(means) < 2:
        return None
    slow = max(means, key=lambda r: means[r])
    fast = min(means, key=lambda r: means[r])
    skew = means[slow] - means[fast]
    mean = sum(means.values()) / len(means)
    pct = 100.0 * skew / mean if mean > 0 else None
    return {
        "name": name,
        "parent": parent,
        "depth": depth,
        "per_rank_mean_ms": {str(r): means[r] for r in sorted(means)},
        "skew_ms": skew,
        "skew_pct": pct,
        "slowest_rank": slow,
        "fastest_rank": fast,
        "flagged": pct is not None and pct > SKEW_FLAG_PCT,
    }


def rank_skew(procs, kind: str | None, basis: str) -> dict | None:
    """summary.json `rank_skew`, or None with fewer than two ranks."""
    if len({p.rank for p in procs}) < 2:
        return None
    field = "dev_ns" if basis == "device" else "host_ns"
    cycle_times: dict[int, list[int]] = {}
    phase_times: dict[tuple, dict[int, list[int]]] = {}
    order: list[tuple] = []
    for proc in procs:
        chosen = {c["cycle"] for c in proc.timed_cycles if kind is None or cycle_kind(c) == kind}
        cycle_times.setdefault(proc.rank, []).extend(
            c[field] for c in proc.timed_cycles if c["cycle"] in chosen and c.get(field) is not None
        )
        for r in proc.phases:
            if r.get("cycle") not in chosen or r.get(field) is None:
                continue
            key = (r["name"], r.get("parent"), r.get("depth") or 0)
            if key not in phase_times:
                phase_times[key] = {}
                order.append(key)
            phase_times[key].setdefault(proc.rank, []).append(r[field])
    found = [_row("cycle", None, -1, cycle_times)]
    found += [_row(name, parent, depth, phase_times[(name, parent, depth)]) for name, parent, depth in order]
    rows = [r for r in found if r is not None]
    return {
        "kind": kind,
        "basis": basis,
        "threshold_pct": SKEW_FLAG_PCT,
        "ranks": sorted({p.rank for p in procs}),
        "phases": rows,
        "flagged": [r["name"] for r in rows if r["flagged"]],
    }
