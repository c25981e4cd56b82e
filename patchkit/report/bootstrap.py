"""Percentile-bootstrap intervals for ratios of sums (a phase's share of the cycle), over units
(timed cycles) resampled whole, with replacement. No report types here.

    ratio_intervals(rows, pairs) -> [(low, high) or None per pair]

`rows`: one row per unit, a column per quantity (a phase's time in that cycle, the cycle's
time). A pair (numerator column, denominator column) stands for the share
100 * sum(numerator) / sum(denominator), which is how the report computes every share (the
mean phase over the mean cycle), so the bootstrap recomputes exactly that statistic on each
resample.

Reproducible and the same with or without numpy. Resample b's i-th draw is unit
splitmix64(seed, b * n + i) scaled to 0..n-1: a counter-based generator that numpy evaluates on whole
arrays and plain Python one value at a time, giving the same indices. The report's times are
integer nanoseconds: with numpy each resample's sums are a product of the resample's
multiplicities (a weight per unit) by the rows in float64, exact while every partial sum stays
below 2**53 ns (104 days), so both paths compute the same sums, the same shares and the same
percentiles. numpy comes with matplotlib (the report extra); without it the plain-Python path
gives the same interval, about a hundred times slower (seconds for a few thousand cycles).
"""

from __future__ import annotations

from collections.abc import Sequence

from patchkit.report.stats import percentile_sorted

RESAMPLES = 1000
SEED = 29  # any fixed value makes a report reproducible
LEVEL = 95.0
MIN_UNITS = 2  # below this a resample can only repeat the one unit: no interval
BLOCKS = 20  # blocks of consecutive cycles a share's bootstrap resamples (consecutive_blocks)
# what a share's bootstrap resamples, in the words table.txt, report.html and summary.json's
# share_ci.method all use ("a bootstrap over " + UNIT): consecutive_blocks' blocks (a block of
# one cycle where a run has BLOCKS cycles or fewer), each cycle whole with every rank's records
UNIT = "blocks of consecutive timed cycles"
DASH = "\u2013"  # en dash, between the two ends of an interval as printed

_MASK = (1 << 64) - 1
_GAMMA = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB
_CHUNK_DRAWS = 2_000_000  # draws per numpy chunk (16 MB of uint64 indices)


def _splitmix(x: int) -> int:
    z = (x * _GAMMA + _GAMMA) & _MASK
    z = ((z ^ (z >> 30)) * _M1) & _MASK
    z = ((z ^ (z >> 27)) * _M2) & _MASK
    return z ^ (z >> 31)


def _key(seed: int) -> int:
    """The counter offset of a seed (its own splitmix value, so seeds 1 and 2 share no draws)."""
    return _splitmix(seed & _MASK)


def _unit(z: int, n: int) -> int:
    """A 64-bit hash value to a unit index in 0..n-1 (its top 32 bits scaled: n < 2**32)."""
    return ((z >> 32) * n) >> 32


def resample_indices(n: int, b: int, seed: int = SEED) -> list[int]:
    """Resample `b`'s draws: n unit indices in 0..n-1 (plain Python; the reference)."""
    key = _key(seed)
    base = b * n
    return [_unit(_splitmix((key + base + i) & _MASK), n) for i in range(n)]


def _interval(shares: list[float], level: float) -> tuple[float, float] | None:
    if not shares:
        return None
    ordered = sorted(shares)
    tail = (100.0 - level) / 2
    return (percentile_sorted(ordered, tail), percentile_sorted(ordered, 100.0 - tail))


def _sums_python(rows: Sequence[Sequence[float]], resamples: int, seed: int):
    n = len(rows)
    cols = list(zip(*rows))
    for b in range(resamples):
        weights = [0] * n
        for i in resample_indices(n, b, seed):
            weights[i] += 1
        picked = [(i, w) for i, w in enumerate(weights) if w]
        yield [sum(col[i] * w for i, w in picked) for col in cols]


def _sums_numpy(np, rows: Sequence[Sequence[float]], resamples: int, seed: int):
    """The resamples' column sums, a chunk of resamples at a time: the draws hashed in place
    (as _splitmix and _unit do), counted per unit, and the counts times the rows."""
    n = len(rows)
    values = np.asarray(rows, dtype=np.float64)
    u64 = np.uint64
    per_chunk = max(1, min(resamples, _CHUNK_DRAWS // n))
    offsets = (np.arange(per_chunk, dtype=np.uint64) * u64(n))[:, None]
    out = np.empty((resamples, values.shape[1]), dtype=np.float64)
    with np.errstate(over="ignore"):
        for b0 in range(0, resamples, per_chunk):
            m = min(resamples, b0 + per_chunk) - b0
            z = np.arange(b0 * n, (b0 + m) * n, dtype=np.uint64).reshape(m, n)
            z += u64(_key(seed))
            z *= u64(_GAMMA)
            z += u64(_GAMMA)
            t = z >> u64(30)
            z ^= t
            z *= u64(_M1)
            np.right_shift(z, u64(27), out=t)
            z ^= t
            z *= u64(_M2)
            np.right_shift(z, u64(31), out=t)
            z ^= t
            z >>= u64(32)
            z *= u64(n)
            z >>= u64(32)
            z += offsets[:m]
            weights = np.bincount(z.ravel().view(np.int64), minlength=m * n).reshape(m, n)
            out[b0 : b0 + m] = weights.astype(np.float64) @ values
    return out


def _numpy():
    try:
        import numpy
    except ImportError:  # the report without its extra: the plain-Python path
        return None
    return numpy


def ratio_intervals(
    rows: Sequence[Sequence[float]],
    pairs: Sequence[tuple[int, int]],
    resamples: int = RESAMPLES,
    seed: int = SEED,
    level: float = LEVEL,
    use_numpy: bool | None = None,
) -> list[tuple[float, float] | None]:
    """Per pair (numerator column, denominator column): the `level` % percentile interval of
    100 * sum(numerator) / sum(denominator) over `resamples` resamples of the rows (units)
    drawn whole with replacement; None with fewer than MIN_UNITS rows or a zero denominator
    sum. Resamples whose denominator sums to zero are left out of that pair's percentiles.
    `use_numpy` None: numpy when it can be imported."""
    if len(rows) < MIN_UNITS or not pairs:
        return [None] * len(pairs)
    den_totals = {d: sum(r[d] for r in rows) for d in {d for _, d in pairs}}
    totals = [den_totals[d] for _, d in pairs]
    np = _numpy() if use_numpy is None or use_numpy else None
    if use_numpy and np is None:
        raise ImportError("numpy is not installed")
    if np is not None:
        sums = _sums_numpy(np, rows, resamples, seed)
        result: list[tuple[float, float] | None] = []
        for (num, den), total in zip(pairs, totals):
            if not total:
                result.append(None)
                continue
            d = sums[:, den]
            keep = d != 0
            shares = 100.0 * sums[keep, num] / d[keep]
            # the same ops as the plain-Python path, value by value (IEEE: same results)
            result.append(_interval(shares.tolist(), level))
        return result
    per_pair: list[list[float]] = [[] for _ in pairs]
    for s in _sums_python(rows, resamples, seed):
        for shares, (num, den) in zip(per_pair, pairs):
            if s[den]:
                shares.append(100.0 * s[num] / s[den])
    return [_interval(shares, level) if total else None for shares, total in zip(per_pair, totals)]


def consecutive_blocks(rows: Sequence[Sequence[float]], blocks: int = BLOCKS) -> list[list[float]]:
    """The rows (in their order: consecutive cycles) summed into `blocks` blocks of
    consecutive rows, as equal as the count allows; fewer rows than blocks stay as they are.

    A block bootstrap (Carlstein 1986; Kunsch 1989) resamples these instead of single cycles:
    neighbouring cycles share a batch make-up that drifts over a run, and resampling them one by
    one treats that drift as noise that averages out (bench/share_blocks_sim.py: a share's 95 %
    interval over 2,000 cycles whose batch size drifts, AR(1) with 0.9 a cycle, held the truth
    in 54 % of runs by cycles and in 92.5 % by 20 blocks; on independent cycles 93.5 % and 91 %).
    A drift slower than a twentieth of the run is still too narrow: 0.99 a cycle over 2,000
    cycles 70.5 %, 0.9 over 200 cycles 78.5 %."""
    n = len(rows)
    if n <= blocks:
        return [list(r) for r in rows]
    out = []
    for b in range(blocks):
        part = rows[b * n // blocks : (b + 1) * n // blocks]
        out.append([sum(col) for col in zip(*part)])
    return out


def half_width(interval: Sequence[float] | None) -> float | None:
    """Half the width of an interval (points of share), or None."""
    return None if interval is None else (interval[1] - interval[0]) / 2


def cycles_needed(n: int, width: float, target: float = 2.0) -> int:
    """How many units would bring a half-width `width` seen over `n` units down to `target`,
    the half-width shrinking as 1/sqrt(units)."""
    import math

    return max(n, math.ceil(n * (width / target) ** 2))
