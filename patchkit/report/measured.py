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

Timing that spends a budget (``PATCHKIT_TIMER_BUDGET``, the runtime's default when no
sample is set): the probability p a cycle was timed with changes over the run (the header's
starting p, then each "sampling" record's p from its cycle index on; ``timed_probability``).
A timed cycle drawn at p stands for 1/p cycles, so where p varies over the cycles described
the report weights each timed cycle by 1/p (``cycle_weights``): shares (sums of phase time
over sums of cycle time, and their bootstrap intervals), the means and the calls per cycle.
Where every cycle described was drawn at one p, the weights are equal and change nothing
(no weighting is done). Percentiles, counts and the per-rank figures stay unweighted.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, replace

from patchkit.errors import InvalidInput
from patchkit.report.load import ProcessTiming
from patchkit.report.stats import median
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


def _header_sampling(proc: ProcessTiming) -> dict:
    info = proc.header.get("sampling")
    return info if isinstance(info, dict) else {}


def _is_budgeted(proc: ProcessTiming) -> bool:
    return _header_sampling(proc).get("budget_pct") is not None


def _number(value) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if ok else None


def timed_probability(proc: ProcessTiming) -> Callable[[int], float]:
    """The probability each cycle index of `proc` was timed with: 1/N under a fixed
    PATCHKIT_TIMER_SAMPLE=N, under a budget the header's starting p and then each "sampling"
    record's p from its cycle on, 1 without sampling."""
    info = _header_sampling(proc)
    every = _number(info.get("every"))
    if every and every > 1:
        return lambda index: 1.0 / every
    start = _number(info.get("p"))
    start = 1.0 if start is None else start
    changes = sorted(
        (r["cycle"], float(r["p"]))
        for r in proc.sampling_changes
        if isinstance(r.get("cycle"), int) and _number(r.get("p"))
    )
    if not changes:
        return lambda index: start
    starts = [c for c, _ in changes]
    rates = [q for _, q in changes]

    def at(index: int) -> float:
        k = bisect_right(starts, index) - 1
        return rates[k] if k >= 0 else start

    return at


def cycle_weights(procs: list[ProcessTiming], timed: list[dict]) -> list[dict[int, float]] | None:
    """Per process, {cycle index: 1/p} for its cycles in `timed` (per process {index: cycle}),
    or None when they were all drawn at one p (equal weights change no ratio and no mean)."""
    weights = []
    seen: set[float] = set()
    for proc, sel in zip(procs, timed):
        at = timed_probability(proc)
        w = {}
        for index in sel:
            p = at(index)
            seen.add(p)
            w[index] = 1.0 / p if p > 0 else 1.0
        weights.append(w)
    return weights if len(seen) > 1 else None


def sampling(procs: list[ProcessTiming]) -> dict | None:
    """summary.json `sampling`: {"every", "method", "seed", "timed_cycles", "cycles"}, or None
    when no process sampled; under a budget also "budget" (see _budget). Counts are over the
    cycles kept (the measured window), off blocks of PATCHKIT_TIMER_AB excluded from both."""
    info = next(
        (_header_sampling(p) for p in procs if (_number(_header_sampling(p).get("every")) or 0) > 1),
        None,
    )
    budgeted = [p for p in procs if _is_budgeted(p)]
    if info is None and budgeted:
        info = _header_sampling(budgeted[0])
    untimed = any(c.get("timed") is False for p in procs for c in p.cycles)
    if info is None and not untimed:
        return None
    info = info or {}
    cycles = [c for p in procs for c in p.cycles if c.get("ab") != "off"]
    n_timed = sum(1 for c in cycles if c.get("timed") is not False)
    out = {
        "every": info.get("every"),
        "method": info.get("method"),
        "seed": info.get("seed"),
        "timed_cycles": n_timed,
        "cycles": len(cycles),
    }
    if budgeted:
        out["budget"] = _budget(procs, budgeted, n_timed, len(cycles))
    return out


def _cycles_period_ns(proc: ProcessTiming) -> float | None:
    """The median host start-to-start of consecutive cycle indices (no runtime figure yet)."""
    by_index = {c["cycle"]: c["t0"] for c in proc.cycles if isinstance(c.get("t0"), int)}
    gaps = [by_index[i + 1] - t for i, t in by_index.items() if i + 1 in by_index]
    return median([float(g) for g in gaps])


def _budget(procs: list[ProcessTiming], budgeted: list[ProcessTiming], timed: int, cycles: int) -> dict:
    """summary.json `sampling.budget` (PATCHKIT_TIMER_BUDGET): `pct` (the budget, % of the
    cycle period), `controller` (its method), `timed_fraction` (timed cycles / cycles
    described), `p_min` / `p_max` (the rates the described cycles were drawn at), `p_final`
    (the lowest rank's last rate), `changes` (changes of p, all ranks), `cost_us` (the
    cost per timed cycle the controller used, median over ranks: their last figure; the
    lower of `host_cost_us`, the runtime's host time per timed cycle, and `visible_us`, an
    upper bound on what a timed cycle adds to the period from adjacent timed and untimed
    cycles, null until 32 such pairs), `period_ms`
    (the cycle period it saw, median over ranks; from the cycle records' start-to-start when
    no decision was made yet: `period_source` "runtime" | "cycles"), `spent_pct` (about what
    timing spent: timed_fraction * cost / period, in % of the period), `weighted` (whether
    shares weight each timed cycle by 1/p: p varied over the described cycles) and
    `by_rank` ([{rank, pid, p_final, changes, cost_us, host_cost_us, visible_us, period_ms}])."""
    info = _header_sampling(budgeted[0])
    rates, timed_rates = _drawn_rates(procs)
    ranked = [_rank_budget(proc) for proc in budgeted]
    rows = [row for row, _ in ranked]
    source = "cycles" if any(from_cycles for _, from_cycles in ranked) else "runtime"
    cost_us = median([r["cost_us"] for r in rows if r["cost_us"] is not None])
    host_us = median([r["host_cost_us"] for r in rows if r["host_cost_us"] is not None])
    visible_us = median([r["visible_us"] for r in rows if r["visible_us"] is not None])
    period_ms = median([r["period_ms"] for r in rows if r["period_ms"] is not None])
    fraction = timed / cycles if cycles else None
    spent = None
    if fraction is not None and cost_us is not None and period_ms:
        spent = 100.0 * fraction * cost_us / (period_ms * 1e3)
    return {
        "pct": info.get("budget_pct"),
        "controller": (info.get("controller") or {}).get("method"),
        "timed_fraction": fraction,
        "p_min": min(rates) if rates else None,
        "p_max": max(rates) if rates else None,
        "p_final": rows[0]["p_final"],
        "changes": sum(r["changes"] for r in rows),
        "cost_us": cost_us,
        "host_cost_us": host_us,
        "visible_us": visible_us,
        "period_ms": period_ms,
        "period_source": source,
        "spent_pct": spent,
        "weighted": len(timed_rates) > 1,
        "by_rank": rows,
    }


def _drawn_rates(procs: list[ProcessTiming]) -> tuple[set[float], set[float]]:
    """The rates p the described cycles were drawn at, and those of the timed ones."""
    rates: set[float] = set()
    timed_rates: set[float] = set()
    for proc in procs:
        at = timed_probability(proc)
        for c in proc.cycles:
            if c.get("ab") != "off" and isinstance(c.get("cycle"), int):
                rates.add(at(c["cycle"]))
                if c.get("timed") is not False:
                    timed_rates.add(at(c["cycle"]))
    return rates, timed_rates


def _rank_budget(proc: ProcessTiming) -> tuple[dict, bool]:
    """One rank's `sampling.budget.by_rank` row (from its last sampling stats, else its last
    change record, else its header), and whether its period had to come from its cycle
    records (no decision made yet)."""
    last = (proc.stats or {}).get("sampling") or {}
    recs = proc.sampling_changes
    final = _number(last.get("p"))
    if final is None:
        final = _number(recs[-1].get("p")) if recs else _number(_header_sampling(proc).get("p"))
    cost = _number(last.get("cost_ns"))
    period = _number(last.get("period_ns"))
    host = _number(last.get("host_cost_ns"))
    visible = _number(last.get("visible_ns"))
    if recs:
        cost = _number(recs[-1].get("cost_ns")) if cost is None else cost
        period = _number(recs[-1].get("period_ns")) if period is None else period
        host = _number(recs[-1].get("host_cost_ns")) if host is None else host
        visible = _number(recs[-1].get("visible_ns")) if visible is None else visible
    if host is None:  # a runtime before the pairs: its cost was host time
        host = cost
    from_cycles = period is None
    if from_cycles:
        period = _cycles_period_ns(proc)
    changes = last.get("changes")
    if not isinstance(changes, int):
        changes = sum(1 for r in recs if r.get("p") != r.get("prev_p"))
    return (
        {
            "rank": proc.rank,
            "pid": proc.header.get("pid"),
            "p_final": final,
            "changes": changes,
            "cost_us": None if cost is None else cost / 1e3,
            "host_cost_us": None if host is None else host / 1e3,
            "visible_us": None if visible is None else visible / 1e3,
            "period_ms": None if period is None else period / 1e6,
        },
        from_cycles,
    )
