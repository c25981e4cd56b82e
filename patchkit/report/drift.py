"""Drift: the level of cycle time changing across the measured window (another load on the
machine, a throttled clock), told apart from stationary noise and from stalls (one-off cycles far
slower than the rest, patchkit.report.stalls, left out before this looks).

    find_drift(procs, stall_sets, basis, kinds) -> summary.json's ``drift``
    segment_levels(values, batch_sizes) -> the finding on one series (what find_drift runs)

What is tested. The lead rank's steady-state cycles of the decode kind (timed, inside the
measured window, not stalls), in their order, on the report's basis (device time where the
report has it, else host time). Where the cycles carry batch sizes, each cycle's log time is
taken against the median log time of its batch size (sizes with fewer than GROUP_MIN cycles
pooled with the next larger ones), so a stretch of large batches is not a drift: segments are
compared at the same batch size, the same work done slower.

How. Binary segmentation with a rank CUSUM (Pettitt 1979). For a run of n cycles every split
k (MIN_SEGMENT cycles or more a side) is scored by the Mann-Whitney z of the first k cycles
against the others (standardized, so that a short end counts as much as a split in the
middle); the best split's score is held against the best score of PERMUTATIONS random
reorderings of the run (within each batch-size group; seeded, so a record gives one answer).
Where p <= ALPHA the run is split where one change of level fits it best (the least absolute
deviation from each side's median: the standardized score leans to the middle), and each side
is tested again, up to MAX_SEGMENTS segments. Ranks make the test blind to the shape of the
noise (heavy tails, an outlier), and the permutation bounds its false-alarm rate at ALPHA on
any run whose cycles are exchangeable, however many splits the best score chose from. Past
MAX_POINTS cycles the run is tested in as many bins of consecutive cycles (each bin's median
relative time), so the cost stays bounded.

Which segments drifted. The segments found sit at levels (their median relative log time); the
longest is the steady state. A segment whose level is MIN_RATIO (1.5x) or more from the steady
state's, slower or faster, and whose cycles rank apart from the steady state's (Mann-Whitney
at ALPHA) drifted (neighbouring ones on the same side count as one); its
`ratio_to_rest` is its median relative time over that of every cycle outside the drifted
segments. A slow trend is a drift too (shape "trend"): three segments or more whose levels
move one way, each less than MIN_RATIO from the next, MIN_RATIO or more from first to last.
A significant split whose sides differ by less than MIN_RATIO is not reported: a decode cycle
moves with its batch's sequence lengths and acceptance by less than that (patchkit.report.stalls),
and a test over thousands of cycles finds changes far smaller than matter to a share.

Limits. A slowdown shorter than MIN_SEGMENT cycles is not a level (its cycles are stalls when
they pass the stall rule); one in the middle of a long run is found when it is long enough to
move a split's rank sum, which is also when it weighs in the shares; a slowdown that the stall
rule takes whole (over 4x the median) is counted among the stalls instead. A stretch that holds
most of a batch size's cycles sets that size's median itself, so a slowdown at sizes seen only
then is not told from the work; where sizes come in long blocks (a benchmark's ramp) a drift
over half of a size's cycles can be read on the wrong side. A level that wanders (cycle times
correlated over tens of cycles, by 1.5x or more) is reported as a drift: the shares
over such a window hold for its mix of levels only.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Hashable, Sequence
from itertools import accumulate, islice, pairwise
from operator import mul, sub
from typing import Any

from patchkit.report.bootstrap import DASH
from patchkit.report.kinds import KIND_PRIMARY, NO_KIND, cycle_kind
from patchkit.report.load import ProcessTiming
from patchkit.report.stats import median

ALPHA = 0.01  # a split's permutation p-value at most this
PERMUTATIONS = 199  # reorderings per test: p = (1 + as high) / 200
MIN_SEGMENT = 5  # cycles a side of a split
MIN_CYCLES = 20  # fewer steady cycles: not tested
MIN_RATIO = 1.5  # a level this far from the steady state's (either way) is a drift
GROUP_MIN = 10  # cycles per batch-size group (smaller sizes pooled with the next)
MAX_SEGMENTS = 16
MAX_POINTS = 2000  # longer runs are tested in this many bins of consecutive cycles
SEED = 31
SHIFT, TREND = "shift", "trend"

METHOD = (
    "binary segmentation of log cycle time (against its batch size's median where cycles carry one) "
    f"by a rank CUSUM, each split kept at permutation p <= {ALPHA:g} ({PERMUTATIONS} reorderings); "
    f"a segment {MIN_RATIO:g}x or more from the longest one drifted"
)
# the same in a few words, for table.txt's line
METHOD_BRIEF = f"rank CUSUM segmentation at p <= {ALPHA:g}, a level {MIN_RATIO:g}x from the steady one"


# ---- the test on one series ------------------------------------------------------------------


def _doubled_ranks(values: Sequence[float]) -> list[int]:
    """Twice each value's mid-rank (1-based): integers, so the rank sums are exact."""
    order = sorted(range(len(values)), key=values.__getitem__)
    out = [0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for t in range(i, j + 1):
            out[order[t]] = i + j + 2
        i = j + 1
    return out


class _Splits:
    """The standardized rank statistic of every split k = m..n-m of a run of n: z_k =
    (2 W_k - k (n+1)) / sqrt(k (n-k) (n+1) / 3), W_k the rank sum of the first k values (the
    Mann-Whitney z of the first k against the rest, no tie correction)."""

    def __init__(self, n: int, m: int):
        self.n, self.m = n, m
        ks = range(m, n - m + 1)
        self.offsets = [k * (n + 1) for k in ks]
        self.weights = [1.0 / math.sqrt(k * (n - k) * (n + 1) / 3.0) for k in ks]

    def scores(self, ranks2: Sequence[int]):
        sums = islice(accumulate(ranks2), self.m - 1, self.n - self.m)
        return map(mul, map(abs, map(sub, sums, self.offsets)), self.weights)

    def best(self, ranks2: Sequence[int]) -> tuple[float, int]:
        """(the largest |z_k|, its k)."""
        best, at = -1.0, self.m
        for i, z in enumerate(self.scores(ranks2)):
            if z > best:
                best, at = z, self.m + i
        return best, at


def rank_sum_z(first: Sequence[float], second: Sequence[float]) -> float:
    """The Mann-Whitney z of ``first`` against ``second`` (positive: ``first`` ranks higher)."""
    k, n = len(first), len(first) + len(second)
    ranks2 = _doubled_ranks([*first, *second])
    return (sum(ranks2[:k]) - k * (n + 1)) / math.sqrt(k * (n - k) * (n + 1) / 3.0)


def split_statistic(values: Sequence[float], m: int = MIN_SEGMENT) -> tuple[float, int]:
    """The best split of ``values``: (max over k of |z_k|, that k), k values before it."""
    return _Splits(len(values), m).best(_doubled_ranks(values))


def permutation_pvalue(
    values: Sequence[float],
    groups: Sequence[Hashable] | None = None,
    m: int = MIN_SEGMENT,
    permutations: int = PERMUTATIONS,
    seed: int | str = SEED,
    give_up_above: float | None = None,
) -> tuple[float, int]:
    """(p, best k): the share of reorderings of ``values`` (within each group where ``groups``
    labels them) whose best split scores as high as theirs, counting the values themselves:
    (1 + as high) / (1 + permutations). ``give_up_above``: stop once p must exceed it."""
    ranks2 = _doubled_ranks(values)
    splits = _Splits(len(values), m)
    observed, at = splits.best(ranks2)
    bar = observed * (1 - 1e-12)  # equal scores count as high (rounding apart)
    rng = random.Random(seed)
    positions: list[list[int]] = []
    if groups is not None:
        by: dict[Hashable, list[int]] = {}
        for i, g in enumerate(groups):
            by.setdefault(g, []).append(i)
        positions = [p for p in by.values() if len(p) > 1]
    most = None if give_up_above is None else give_up_above * (permutations + 1) - 1
    high = 0
    for _ in range(permutations):
        if groups is None:
            shuffled = ranks2[:]
            rng.shuffle(shuffled)
        else:
            shuffled = ranks2[:]
            for pos in positions:
                vals = [ranks2[p] for p in pos]
                rng.shuffle(vals)
                for p, v in zip(pos, vals):
                    shuffled[p] = v
        if max(splits.scores(shuffled)) >= bar:
            high += 1
            if most is not None and high > most:
                break
    return (1 + high) / (1 + permutations), at


def _absolute_deviations(values: Sequence[float]) -> list[float]:
    """For each k = 0..n: the sum of |v - median| over values[:k] (two heaps, a running median)."""
    low: list[float] = []  # max-heap (negated): the smaller half
    high: list[float] = []  # min-heap: the larger half
    low_sum = high_sum = 0.0
    out = [0.0]
    for v in values:
        if low and v > -low[0]:
            heapq.heappush(high, v)
            high_sum += v
        else:
            heapq.heappush(low, -v)
            low_sum += v
        if len(low) > len(high) + 1:
            moved = -heapq.heappop(low)
            low_sum -= moved
            heapq.heappush(high, moved)
            high_sum += moved
        elif len(high) > len(low):
            moved = heapq.heappop(high)
            high_sum -= moved
            heapq.heappush(low, -moved)
            low_sum += moved
        mid = -low[0]
        out.append((mid * len(low) - low_sum) + (high_sum - mid * len(high)))
    return out


def best_split(values: Sequence[float], m: int = MIN_SEGMENT) -> int:
    """Where one change of level fits ``values`` best: the k (m..n-m) that leaves the least
    absolute deviation from each side's median. The rank statistic says whether there is a
    change; this says where, since the standardized statistic leans to the middle of a run."""
    n = len(values)
    before = _absolute_deviations(values)
    after = _absolute_deviations(values[::-1])[::-1]
    return min(range(m, n - m + 1), key=lambda k: before[k] + after[k])


def _segments(values: list[float], groups, lo: int, hi: int, m: int, out: list, found: list) -> None:
    """Binary segmentation of values[lo:hi]: the segments' (start, end) into ``out``."""
    n = hi - lo
    if n >= 2 * m and len(found) < MAX_SEGMENTS - 1:
        part = values[lo:hi]
        p, _ = permutation_pvalue(
            part, None if groups is None else groups[lo:hi], m, seed=f"{SEED}:{lo}:{hi}", give_up_above=ALPHA
        )
        if p <= ALPHA:
            k = best_split(part, m)
            found.append(lo + k)
            _segments(values, groups, lo, lo + k, m, out, found)
            _segments(values, groups, lo + k, hi, m, out, found)
            return
    out.append((lo, hi))


def _batch_groups(sizes: Sequence[object]) -> list[int] | None:
    """Each cycle's group of batch sizes (consecutive sizes pooled up to GROUP_MIN cycles),
    or None when some cycle has no batch size or all share one group."""
    if not sizes or any(not isinstance(s, int) or isinstance(s, bool) for s in sizes):
        return None
    counts: dict = {}
    for s in sizes:
        counts[s] = counts.get(s, 0) + 1
    group_of: dict = {}
    group, filled = 0, 0
    for s in sorted(counts):
        if filled >= GROUP_MIN:
            group, filled = group + 1, 0
        group_of[s] = group
        filled += counts[s]
    if filled < GROUP_MIN and group:  # a short last group joins the one before
        for s, g in group_of.items():
            if g == group:
                group_of[s] = group - 1
        group -= 1
    return None if group == 0 else [group_of[s] for s in sizes]


def _mid(values: Sequence[float]) -> float:
    """The median of values that are never empty here."""
    found = median(values)
    return 0.0 if found is None else found


def relative_log_times(values: Sequence[float], groups: Sequence[int] | None) -> list[float]:
    """log(value) less the median log value of its group (of all values without groups)."""
    logs = [math.log(v) for v in values]
    by: dict = {}
    for i, g in enumerate(groups or [0] * len(logs)):
        by.setdefault(g, []).append(logs[i])
    centre = {g: _mid(v) for g, v in by.items()}
    return [x - centre[g] for x, g in zip(logs, groups or [0] * len(logs))]


def _binned(rel: list[float]) -> tuple[list[float], list[int]]:
    """(each bin's median, the position each bin starts at) for MAX_POINTS bins."""
    n = len(rel)
    starts = [b * n // MAX_POINTS for b in range(MAX_POINTS)]
    ends = starts[1:] + [n]
    return [_mid(rel[a:b]) for a, b in zip(starts, ends)], starts


def segment_levels(values: Sequence[float], sizes: Sequence[object] | None = None) -> dict:
    """The finding on one series of cycle times in order (any positive unit) with their batch
    sizes (or None): {detected, shape, segments: [{start, end, level, ratio_to_rest}] of the
    drifted ones (positions, end excluded; levels and ratios of relative time), levels: every
    segment found [(start, end, level)], change_points, by_batch_size}."""
    groups = _batch_groups(sizes) if sizes is not None else None
    rel = relative_log_times(values, groups)
    n = len(rel)
    if n > MAX_POINTS:
        points, starts = _binned(rel)
        width = n / MAX_POINTS
        m = max(2, math.ceil(MIN_SEGMENT / width))
        bins: list = []
        _segments(points, None, 0, len(points), m, bins, [])
        bounds = [(starts[a], starts[b] if b < len(starts) else n) for a, b in bins]
    else:
        bounds = []
        _segments(rel, groups, 0, n, MIN_SEGMENT, bounds, [])
    levels = [(a, b, _mid(rel[a:b])) for a, b in bounds]
    out: dict[str, Any] = {
        "detected": False,
        "shape": None,
        "segments": [],
        "levels": levels,
        "change_points": [a for a, _, _ in levels[1:]],
        "by_batch_size": groups is not None,
    }
    limit = math.log(MIN_RATIO)
    trend = _trend(levels, limit)
    if trend:
        spans = [(a, b) for a, b, _ in trend]
        out.update(detected=True, shape=TREND, segments=[_described(rel, span, spans) for span in spans])
        return out
    steady = max(levels, key=lambda s: s[1] - s[0])
    drifted: list[list[tuple]] = []
    for seg in levels:
        gap = seg[2] - steady[2]
        if abs(gap) < limit or not _apart(rel, seg, steady):
            continue
        if drifted and drifted[-1][-1][1] == seg[0] and (drifted[-1][-1][2] > steady[2]) == (gap > 0):
            drifted[-1].append(seg)
        else:
            drifted.append([seg])
    if drifted:
        spans = _edges(rel, [(run[0][0], run[-1][1]) for run in drifted])
        out.update(detected=True, shape=SHIFT, segments=[_described(rel, span, spans) for span in spans])
    return out


def _edges(rel: list[float], spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The drifted spans with their edges moved cycle by cycle: an edge cycle nearer the rest's
    level than the span's leaves it, a neighbour nearer the span's joins it. A split is placed
    for the run it was tested on; a short stretch at the window's edge (fewer than MIN_SEGMENT
    cycles before a drift) or a split in a run of three levels can put a few cycles on the
    wrong side of it."""
    inside = {i for a, b in spans for i in range(a, b)}
    rest_level = _mid([r for i, r in enumerate(rel) if i not in inside])
    out: list[tuple[int, int]] = []
    for j, (a, b) in enumerate(spans):
        level = _mid(rel[a:b])
        near = [abs(r - level) < abs(r - rest_level) for r in rel]
        while b - a > MIN_SEGMENT and not near[a]:
            a += 1
        while b - a > MIN_SEGMENT and not near[b - 1]:
            b -= 1
        floor = out[-1][1] if out else 0
        ceiling = spans[j + 1][0] if j + 1 < len(spans) else len(rel)
        while a > floor and near[a - 1]:
            a -= 1
        while b < ceiling and near[b]:
            b += 1
        out.append((a, b))
    return out


def _apart(rel: list[float], seg: tuple, steady: tuple) -> bool:
    """Whether a segment's cycles rank apart from the steady segment's at ALPHA (two-sided,
    the normal tail of the Mann-Whitney z): a split made for a drift beside it can leave a
    short segment whose level is noise."""
    z = rank_sum_z(rel[seg[0] : seg[1]], rel[steady[0] : steady[1]])
    return math.erfc(abs(z) / math.sqrt(2.0)) <= ALPHA


def _trend(levels: list[tuple], limit: float) -> list[tuple] | None:
    """The first and last segments when the levels move one way in steps under ``limit`` and
    by ``limit`` or more in all: a slow trend."""
    if len(levels) < 3:
        return None
    steps = [b[2] - a[2] for a, b in pairwise(levels)]
    one_way = all(s > 0 for s in steps) or all(s < 0 for s in steps)
    if one_way and all(abs(s) < limit for s in steps) and abs(levels[-1][2] - levels[0][2]) >= limit:
        return [levels[0], levels[-1]]
    return None


def _described(rel: list[float], span: tuple[int, int], apart: list[tuple[int, int]]) -> dict:
    """A drifted span: where, its level and its ratio to the cycles outside every span in
    ``apart``."""
    start, end = span
    skip: set[int] = set()
    for a, b in apart:
        skip.update(range(a, b))
    rest = [r for i, r in enumerate(rel) if i not in skip]
    level = _mid(rel[start:end])
    rest_level = _mid(rest) if rest else 0.0
    return {"start": start, "end": end, "level": level, "ratio_to_rest": math.exp(level - rest_level)}


# ---- the report's series -----------------------------------------------------------------------


def _series(proc: ProcessTiming, stalls: set, basis: str, kind: str) -> list[dict]:
    field = "dev_ns" if basis == "device" else "host_ns"
    return [
        c
        for c in sorted(proc.timed_cycles, key=lambda c: c["cycle"])
        if cycle_kind(c) == kind and c["cycle"] not in stalls and (c.get(field) or 0) > 0
    ]


def find_drift(procs: list[ProcessTiming], stall_sets: list[set[int]], basis: str, kinds) -> dict:
    """summary.json's ``drift``, of the lead rank's steady cycles of the decode kind (decode,
    else cycles without a kind): {detected, tested, shape, kind, rank, basis, cycles,
    by_batch_size, segments: [{first_cycle, last_cycle, cycles, median_ms, rest_median_ms,
    ratio_to_rest}], change_points (cycle numbers), method, the constants, untested (why not)}."""
    kind = KIND_PRIMARY if KIND_PRIMARY in kinds else NO_KIND if NO_KIND in kinds else None
    out: dict = {
        "detected": False,
        "tested": False,
        "shape": None,
        "kind": kind,
        "rank": None,
        "basis": basis,
        "cycles": 0,
        "by_batch_size": False,
        "segments": [],
        "change_points": [],
        "method": METHOD,
        "min_ratio": MIN_RATIO,
        "alpha": ALPHA,
        "permutations": PERMUTATIONS,
        "min_segment": MIN_SEGMENT,
        "seed": SEED,
        "untested": None,
    }
    if not procs or kind is None:
        out["untested"] = "no decode cycles"
        return out
    lead = min(range(len(procs)), key=lambda i: procs[i].rank)
    field = "dev_ns" if basis == "device" else "host_ns"
    cycles = _series(procs[lead], stall_sets[lead], basis, kind)
    out.update(rank=procs[lead].rank, cycles=len(cycles))
    if len(cycles) < MIN_CYCLES:
        out["untested"] = f"{len(cycles)} steady cycles, fewer than {MIN_CYCLES}"
        return out
    values = [c[field] / 1e6 for c in cycles]
    found = segment_levels(values, [(c.get("attrs") or {}).get("batch_size") for c in cycles])
    out.update(
        tested=True,
        detected=found["detected"],
        shape=found["shape"],
        by_batch_size=found["by_batch_size"],
        change_points=[cycles[i]["cycle"] for i in found["change_points"]],
    )
    drifted: set[int] = set()
    for seg in found["segments"]:
        drifted.update(range(seg["start"], seg["end"]))
    rest = [v for i, v in enumerate(values) if i not in drifted]
    for seg in found["segments"]:
        a, b = seg["start"], seg["end"]
        out["segments"].append(
            {
                "first_cycle": cycles[a]["cycle"],
                "last_cycle": cycles[b - 1]["cycle"],
                "cycles": b - a,
                "median_ms": median(values[a:b]),
                "rest_median_ms": median(rest),
                "ratio_to_rest": seg["ratio_to_rest"],
            }
        )
    return out


# ---- in words -----------------------------------------------------------------------------------


def _span(seg: dict) -> str:
    return f"cycles {seg['first_cycle']}{DASH}{seg['last_cycle']}"


def _ran(seg: dict) -> str:
    r = seg["ratio_to_rest"]
    return f"{r:.1f}\u00d7 slower" if r >= 1 else f"{1 / r:.1f}\u00d7 faster"


def drift_finding(drift: dict | None) -> str | None:
    """What drifted, in words ("cycles 5-22 ran 3.1x slower than the rest", with an en dash and
    a multiplication sign), or None."""
    if not drift or not drift.get("detected"):
        return None
    segs = drift["segments"]
    if drift.get("shape") == TREND:
        first, last = segs
        rise = last["ratio_to_rest"] / first["ratio_to_rest"]
        way = "rose" if rise >= 1 else "fell"
        factor = rise if rise >= 1 else 1 / rise
        return (
            f"it {way} {factor:.1f}\u00d7 across the window, from {first['median_ms']:.3f} ms "
            f"({_span(first)}) to {last['median_ms']:.3f} ms ({_span(last)})"
        )
    parts = [f"{_span(s)} ran {_ran(s)}" for s in segs]
    return (", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]) + " than the rest"


def drift_line(drift: dict | None) -> str | None:
    """table.txt's line under the decode section: drifted or not, and how it was tested."""
    if not drift or drift.get("kind") is None:
        return None
    of = f"rank {drift['rank']}, " if drift.get("rank") is not None else ""
    if not drift.get("tested"):
        return f"drift: not tested ({of}{drift.get('untested')})"
    same = ", compared at the same batch size" if drift.get("by_batch_size") else ""
    how = f"{of}{drift['cycles']} steady cycles{same}; {METHOD_BRIEF}"
    finding = drift_finding(drift)
    if finding is None:
        return f"no drift in cycle time across the window ({how})"
    return f"cycle time drifted: {finding} ({how}; warning below)"
