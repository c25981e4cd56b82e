"""Order statistics and the Student-t and F distributions shared by the report's rooms
(summarize, overhead, predict, the bootstrap) and the sweep verdicts (patchkit.profile): no
report types here. Pure Python (``math``), so the core runs without scipy;
tests/report/test_stats.py checks every routine here against scipy.stats."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence


def percentile_sorted(ordered: Sequence[float], q: float) -> float:
    """The linear-interpolated percentile (q in 0..100) of values sorted ascending: numpy's
    default method (``statistics.quantiles(..., method="inclusive")``), the one definition
    every percentile of the project uses."""
    pos = (len(ordered) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def percentile(values: Sequence[float], q: float) -> float | None:
    """:func:`percentile_sorted` of unsorted values; None for no values."""
    if not values:
        return None
    return percentile_sorted(sorted(values), q)


def median(values: Sequence[float]) -> float | None:
    """The median (the mean of the middle two of an even count), None for no values."""
    return percentile(values, 50)


# ---- the Student-t distribution -----------------------------------------------------------------


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def betainc(a: float, b: float, x: float, y: float | None = None) -> float:
    """The regularized incomplete beta function I_x(a, b), 0 <= x <= 1. ``y`` is 1 - x where
    the caller knows it to more digits than ``1 - x`` keeps (x within 1e-16 of 1): the t and F
    routines below pass both sides of their ratio."""
    y = 1.0 - x if y is None else y
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    ln_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(y)
    front = math.exp(ln_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, y) / b


def _positive_root(tail: Callable[[float], float], target: float) -> float:
    """The x > 0 where the decreasing ``tail`` crosses ``target``: bracketed by doubling or
    halving from 1, then bisected on the log scale to a relative 1e-13, so that a root of
    1e-30 or 1e20 (the far tails) comes out to full relative precision."""
    lo = hi = 1.0
    if tail(1.0) > target:
        while tail(hi) > target and hi < 1e300:
            lo, hi = hi, hi * 2.0
    else:
        while tail(lo) <= target and lo > 1e-300:
            lo, hi = lo / 2.0, lo
    for _ in range(200):  # bounded: 1e-13 relative takes about 50 halvings of a factor 2
        if hi / lo - 1.0 < 1e-13:
            break
        mid = lo * math.sqrt(hi / lo)  # the geometric mean, without overflowing lo * hi
        if tail(mid) > target:
            lo = mid
        else:
            hi = mid
    return lo * math.sqrt(hi / lo)


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom (df may be fractional)."""
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    if t == 0.0:
        return 0.5
    # x = df / (df + t^2) and 1 - x, each from its own side, so that neither a square overflows
    # nor a small 1 - x is lost in x's rounding
    w = abs(t) / math.sqrt(df)
    if w <= 1.0:
        x, y = 1.0 / (1.0 + w * w), w * w / (1.0 + w * w)
    else:
        z = 1.0 / w
        x, y = z * z / (1.0 + z * z), 1.0 / (1.0 + z * z)
    tail = 0.5 * betainc(df / 2.0, 0.5, x, y)
    return tail if t > 0 else 1.0 - tail


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t."""
    return t_sf(-t, df)


def t_isf(q: float, df: float) -> float:
    """The t with P(T > t) = q (0 < q < 1): the upper-tail quantile, to a relative 1e-12 for
    q down to 1e-150 (``t_ppf(1 - q)`` loses q's digits in ``1 - q``: 2e-9 of the quantile at 1e-6)."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must be in (0, 1), not {q}")
    if q == 0.5:
        return 0.0
    if q > 0.5:
        return -t_isf(1.0 - q, df)  # 1 - q is exact for q in [0.5, 1)
    return _positive_root(lambda t: t_sf(t, df), q)


def t_ppf(p: float, df: float) -> float:
    """The p-quantile of Student's t (0 < p < 1)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), not {p}")
    return -t_isf(p, df) if p < 0.5 else t_isf(1.0 - p, df)


# ---- Fisher's F distribution --------------------------------------------------------------------


def f_sf(f: float, d1: float, d2: float) -> float:
    """P(F > f) for Fisher's F with (d1, d2) degrees of freedom."""
    if f <= 0:
        return 1.0
    if math.isinf(f):
        return 0.0
    return betainc(d2 / 2.0, d1 / 2.0, d2 / (d2 + d1 * f), d1 * f / (d2 + d1 * f))


def f_cdf(f: float, d1: float, d2: float) -> float:
    """P(F <= f), from its own side of the incomplete beta (not 1 - sf: small values keep their digits)."""
    if f <= 0:
        return 0.0
    if math.isinf(f):
        return 1.0
    return betainc(d1 / 2.0, d2 / 2.0, d1 * f / (d1 * f + d2), d2 / (d1 * f + d2))


def f_ppf(p: float, d1: float, d2: float) -> float:
    """The p-quantile of F (0 < p < 1): the lower tail solved on the cdf, the upper on the sf."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), not {p}")
    if p < 0.5:
        return _positive_root(lambda f: -f_cdf(f, d1, d2), -p)
    return _positive_root(lambda f: f_sf(f, d1, d2), 1.0 - p)
