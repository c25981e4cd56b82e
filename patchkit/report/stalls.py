"""Stalls: one-off cycles far slower than the steady state of their kind, kept out of the shares.

Rule. Within one process and one kind of cycle (decode, prefill, ...), a cycle is a stall when
its time is more than ``STALL_FACTOR`` (4) times the median cycle of that kind AND more than
``STALL_FLOOR_MS`` (10 ms) above that median. Both must hold:

- the factor: a steady decode cycle's time moves with the batch size and the accepted length,
  by well under 2x between the busiest and the idlest cycles of a benchmark; a kernel compiled
  or autotuned on a cold cache takes tens to hundreds of times a cycle (140-950 ms against
  3-5 ms on an H200);
- the floor: a very short cycle (0.3 ms) that once takes 1.5 ms is jitter, not a stall; below
  10 ms of excess no single cycle moves the shares of a run of thousands.

The time judged is the one the shares use: device time when the report's basis is device and
the cycle has one, else host time (cycles that sampled timing left untimed have host times
only); each measure is compared with the median of the same measure over every cycle of the
kind in the measured window that has it, timed or not, stalls included (a median is not moved
by a few outliers). Off blocks of PATCHKIT_TIMER_AB are left out (they serve the
overhead measurement only).

Each stall is described by its time, its batch size, whether it was the first cycle of its
kind at that batch size in its process (counted over the whole file, warm-up included: the
usual cause of a stall is a kernel compiled for a new shape), and the phase that took most of
it: the top-level phase with the most time, ``untimed`` when the time between the top-level
phases is larger, ``unsampled`` when the cycle's phases were not timed. Steady-state cycles
(timed cycles that are not stalls) are the only ones in the shares and phase statistics;
stalls are accounted for apart (summary.json ``stalls``, a line under each kind in table.txt,
marked in the trace).
"""

from __future__ import annotations

from patchkit.report.kinds import cycle_kind, ordered_kinds
from patchkit.report.load import ProcessTiming
from patchkit.report.stats import median

STALL_FACTOR = 4.0
STALL_FLOOR_MS = 10.0
UNTIMED = "untimed"
UNSAMPLED = "unsampled"


def rule_text(factor: float = STALL_FACTOR, floor_ms: float = STALL_FLOOR_MS) -> str:
    return f"cycle > {factor:g}x the median cycle of its kind and > median + {floor_ms:g} ms (per process)"


def _measure(cycle: dict, basis: str) -> tuple[str, int | None]:
    if basis == "device" and cycle.get("dev_ns") is not None:
        return "dev_ns", cycle["dev_ns"]
    return "host_ns", cycle.get("host_ns")


def _is_timed(cycle: dict) -> bool:
    return cycle.get("timed") is not False


def find_stalls(
    procs: list[ProcessTiming],
    basis: str,
    first_sets: list[set[int]],
    factor: float = STALL_FACTOR,
    floor_ms: float = STALL_FLOOR_MS,
) -> tuple[dict, list[set[int]]]:
    """(summary.json `stalls`: per kind {count, total_ms, share_of_kind_time, by_phase,
    cycles, ...}; per process the set of its stall cycles' indices)."""
    floor_ns = floor_ms * 1e6
    per_proc: list[set[int]] = []
    found: dict[str, list[dict]] = {}
    kind_total: dict[str, float] = {}
    medians: dict[str, list[float]] = {}
    for proc, first in zip(procs, first_sets):
        stalls: set[int] = set()
        per_proc.append(stalls)
        cycles = [c for c in proc.cycles if c.get("ab") != "off"]
        med = _kind_medians(cycles, basis, kind_total, medians)
        tops = _top_phase_times(proc)
        for c in sorted(cycles, key=lambda c: c["cycle"]):
            field, value = _measure(c, basis)
            if value is None:
                continue
            kind = cycle_kind(c)
            m = med[(kind, field)]
            if m is None or not (value > factor * m and value - m > floor_ns):
                continue
            stalls.add(c["cycle"])
            found.setdefault(kind, []).append(_stall_row(proc, c, field, value, m, tops, c["cycle"] in first))
    kinds = ordered_kinds(set(kind_total) | set(found))
    out = {
        kind: _kind_stalls(
            found.get(kind, []), kind_total.get(kind, 0.0), medians.get(kind, []), factor, floor_ms
        )
        for kind in kinds
    }
    return out, per_proc


def _kind_medians(
    cycles: list[dict], basis: str, kind_total: dict[str, float], medians: dict[str, list[float]]
) -> dict[tuple[str, str], float | None]:
    """One process's median cycle time per (kind, field); adds its time per kind on the basis
    (ms) to ``kind_total`` and its median on the basis to ``medians``."""
    values: dict[tuple[str, str], list[int]] = {}
    for c in cycles:
        kind = cycle_kind(c)
        for field in ("dev_ns", "host_ns"):
            if c.get(field) is not None:
                values.setdefault((kind, field), []).append(c[field])
        value = _measure(c, basis)[1]
        if value is not None:
            kind_total[kind] = kind_total.get(kind, 0.0) + value / 1e6
    med = {key: median(v) for key, v in values.items()}
    for (kind, field), m in med.items():
        if m is not None and field == ("dev_ns" if basis == "device" else "host_ns"):
            medians.setdefault(kind, []).append(m / 1e6)
    return med


def _top_phase_times(proc: ProcessTiming) -> dict[int, dict[str, dict[str, int]]]:
    """cycle -> field -> top-level phase name -> its time in that cycle (captured calls left out)."""
    tops: dict[int, dict[str, dict[str, int]]] = {}
    for r in proc.phases:
        if r.get("depth") == 0 and r.get("cycle") is not None and not r.get("captured"):
            slot = tops.setdefault(r["cycle"], {})
            for field in ("dev_ns", "host_ns"):
                if r.get(field) is not None:
                    per = slot.setdefault(field, {})
                    per[r["name"]] = per.get(r["name"], 0) + r[field]
    return tops


def _stall_row(
    proc: ProcessTiming, c: dict, field: str, value: int, m: float, tops: dict, first_at_batch_size: bool
) -> dict:
    """One stall cycle: where and how long, the phase that took most of it, its time by phase
    (untimed rest included; a cycle sampling left untimed is all "unsampled")."""
    if _is_timed(c):
        parts = dict((tops.get(c["cycle"]) or {}).get(field, {}))
        parts[UNTIMED] = max(value - sum(parts.values()), 0)
    else:
        parts = {UNSAMPLED: value}
    main = max(parts, key=lambda name: parts[name])
    return {
        "cycle": c["cycle"],
        "rank": proc.rank,
        "pid": proc.header.get("pid"),
        "batch_size": (c.get("attrs") or {}).get("batch_size"),
        "ms": value / 1e6,
        "phase": main,
        "first_at_batch_size": first_at_batch_size,
        "times_median": value / m if m else None,
        "measure": "device" if field == "dev_ns" else "host",
        "by_phase": {name: ns / 1e6 for name, ns in parts.items() if ns},
    }


def _kind_stalls(
    cycles: list[dict], ms_of_kind: float, medians: list[float], factor: float, floor_ms: float
) -> dict:
    """summary.json's `stalls` entry for one kind of cycle, from its stall rows."""
    total = sum(s["ms"] for s in cycles)
    by_phase: dict[str, float] = {}
    for s in cycles:
        for name, ms in s["by_phase"].items():
            by_phase[name] = by_phase.get(name, 0.0) + ms
    mains: dict[str, int] = {}
    for s in cycles:
        mains[s["phase"]] = mains.get(s["phase"], 0) + 1
    return {
        "count": len(cycles),
        "total_ms": total,
        "share_of_kind_time": 100.0 * total / ms_of_kind if ms_of_kind else None,
        "by_phase": dict(sorted(by_phase.items(), key=lambda kv: -kv[1])),
        "main_phase_counts": dict(sorted(mains.items(), key=lambda kv: -kv[1])),
        "cycles": [{k: v for k, v in s.items() if k != "by_phase"} for s in cycles],
        "first_at_batch_size": sum(1 for s in cycles if s["first_at_batch_size"]),
        "median_ms": median(medians),
        "rule": rule_text(factor, floor_ms),
        "factor": factor,
        "floor_ms": floor_ms,
    }
