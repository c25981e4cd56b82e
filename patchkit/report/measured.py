"""What the report measures: the cycles inside the measured window, and sampled timing.

A measured window (``window.json``, see patchkit.report.window) keeps the cycles whose
wall-clock start lies in it: each cycle's ``t0`` (perf_counter_ns of its process) is mapped
to wall clock through the pair of clocks in that process's header
(``ProcessTiming.wall_ns``). Cycles that start before the window are counted as
``warmup_cycles``, those after it as ``after_window_cycles``; neither they nor their phases
enter any statistic. Phases outside any cycle (CUDA-graph capture, warm-up passes) are kept
only when they start inside the window too. Without a window every cycle is kept.

Sampled timing (``PATCHKIT_TIMER_SAMPLE=N``): the runtime times the phases of about one
cycle in N and writes the others as cycle records with ``"timed": false`` (host start and
end, attrs, no phases). Those cycles count as cycles (so record counts still equal the
engine's decode count) but shares and phase statistics come from the timed ones.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from patchkit.errors import InvalidInput
from patchkit.report.load import ProcessTiming
from patchkit.report.window import Window


@dataclass
class WindowCounts:
    before: int = 0
    after: int = 0
    inside: int = 0


def _wall(proc: ProcessTiming):
    clock = proc.header.get("clock") or {}
    if clock.get("wall_t0_ns") is None or clock.get("host_t0_ns") is None:
        raise InvalidInput(
            f"{proc.path}: the header has no clock pair (wall_t0_ns, "
            f"host_t0_ns) to place its cycles in the measured window"
        )
    return proc.wall_ns


def restrict(
    procs: list[ProcessTiming], window: Window | None
) -> tuple[list[ProcessTiming], list[WindowCounts]]:
    """Each process reduced to the cycles (and their phases) inside `window`, and per process
    how many cycles were before, inside and after it. Without a window: unchanged."""
    if window is None:
        return list(procs), [WindowCounts(inside=len(p.cycles)) for p in procs]
    kept_procs, counts = [], []
    for proc in procs:
        wall = _wall(proc)
        n = WindowCounts()
        cycles = []
        for c in proc.cycles:
            t = wall(c["t0"])
            if t < window.start_unix_ns:
                n.before += 1
            elif t > window.end_unix_ns:
                n.after += 1
            else:
                n.inside += 1
                cycles.append(c)
        inside = {c["cycle"] for c in cycles}
        phases = [r for r in proc.phases if _phase_inside(r, inside, window, wall)]
        kept_procs.append(replace(proc, cycles=cycles, phases=phases))
        counts.append(n)
    return kept_procs, counts


def _phase_inside(rec: dict, cycles: set, window: Window, wall) -> bool:
    if rec.get("cycle") is not None:
        return rec["cycle"] in cycles
    return rec.get("t0") is None or window.contains(wall(rec["t0"]))


def first_at_batch_size(proc: ProcessTiming) -> set[int]:
    """Indices of the cycles that were the first of their kind at their batch size in this
    process (over the whole file, warm-up included: a size first seen in the warm-up pass is
    not new in the measured one)."""
    from patchkit.report.kinds import cycle_kind

    seen: set = set()
    first: set[int] = set()
    for c in sorted(proc.cycles, key=lambda c: c["cycle"]):
        bs = (c.get("attrs") or {}).get("batch_size")
        if bs is None:
            continue
        key = (cycle_kind(c), bs)
        if key not in seen:
            seen.add(key)
            first.add(c["cycle"])
    return first


def sampling(procs: list[ProcessTiming]) -> dict | None:
    """summary.json `sampling`: {"every", "method", "seed", "timed_cycles", "cycles"}, or None
    when no process sampled. Counts are over the cycles kept (the measured window), off
    blocks of PATCHKIT_TIMER_AB excluded from both."""
    info = next(
        (
            p.header["sampling"]
            for p in procs
            if isinstance(p.header.get("sampling"), dict) and (p.header["sampling"].get("every") or 0) > 1
        ),
        None,
    )
    untimed = any(c.get("timed") is False for p in procs for c in p.cycles)
    if info is None and not untimed:
        return None
    info = info or {}
    cycles = [c for p in procs for c in p.cycles if c.get("ab") != "off"]
    return {
        "every": info.get("every"),
        "method": info.get("method"),
        "seed": info.get("seed"),
        "timed_cycles": sum(1 for c in cycles if c.get("timed") is not False),
        "cycles": len(cycles),
    }
