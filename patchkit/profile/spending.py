"""Group-sequential boundaries by alpha spending: a test that looks after every round of a sweep
whose rounds are bounded (``--repeat``, ``--budget``) and spends its level over those rounds.

Pure Python (``math`` and ``statistics.NormalDist``). A sweep of at most ``H`` rounds looks at
its data after rounds 2, 3, ..., H (round 1 leaves no degree of freedom once rounds are blocks).
Look ``k`` happens at the *information time* ``t_k = k / H`` (the rounds as a share of the
horizon: every round adds one run of each live point). A spending function ``f`` (``f(0) = 0``,
``f(1) = alpha``) says how much of the one-sided level may have been used by time ``t``; the
boundary ``c_k`` on the standardised statistic ``Z_k`` is then the value with

    P(Z_2 < c_2, ..., Z_{k-1} < c_{k-1}, Z_k >= c_k) = f(t_k) - f(t_{k-1})

under no difference, where ``Z_k`` is Brownian motion at ``t_k`` divided by ``sqrt(t_k)``
(correlation ``sqrt(t_j / t_k)``). That is the Lan & DeMets (1983, "Discrete sequential
boundaries for clinical trials", Biometrika 70:659-663) construction: the looks need not be
planned, only the horizon, and a look taken early as the *last* (the budget ran out) spends
what is left. The probabilities are computed by the recursive numerical integration of
Armitage, McPherson & Rowe (1969), as in Jennison & Turnbull (2000, "Group Sequential Methods
with Applications to Clinical Trials", chapter 19); tests/profile/test_spending.py checks them
against scipy's multivariate normal and the published values.

Spending functions (Lan & DeMets 1983; Kim & DeMets 1987): ``obf``, the O'Brien-Fleming type
``2 - 2 Phi(z_{1 - alpha/2} / sqrt(t))``, spends almost nothing early and nearly the whole level
at the horizon; ``pocock``, the Pocock type ``alpha ln(1 + (e - 1) t)``, spends evenly. The
sweep uses ``obf``: its first looks have one to a few degrees of freedom, where the t statistic
is weak however the level is spent (bench/sequential_sim.py compares both).

The spread is unknown, so the sweep's statistic is a t, not a z: each look compares the t
statistic's p-value (with the look's residual degrees of freedom) with the boundary's nominal
level ``1 - Phi(c_k)`` -- the "significance level approach" of Jennison & Turnbull (2000,
section 11.5), which keeps the error rate close to the nominal one at small df
(bench/sequential_sim.py measures it).
"""

from __future__ import annotations

import functools
import itertools
import math
import random
from statistics import NormalDist

SPENDING = ("obf", "pocock")
_N = NormalDist()
_GRID = 161  # points per look of the integration grid (odd: Simpson's rule)
_TAIL = 8.5  # the grid's lower end, in standard deviations of the score at that look


def spent(t: float, alpha: float, spending: str = "obf") -> float:
    """The one-sided level a spending function has used by information time ``t`` (0..1)."""
    if spending not in SPENDING:
        raise ValueError(f"spending must be one of {', '.join(SPENDING)}, not {spending!r}")
    if t <= 0.0:
        return 0.0
    t = min(t, 1.0)
    if spending == "obf":
        return 2.0 - 2.0 * _N.cdf(_N.inv_cdf(1.0 - alpha / 2.0) / math.sqrt(t))
    return alpha * math.log1p((math.e - 1.0) * t)


def _simpson(lo: float, hi: float, n: int) -> tuple[list[float], list[float]]:
    """Nodes and weights of Simpson's rule on [lo, hi] with ``n`` (odd) nodes."""
    h = (hi - lo) / (n - 1)
    nodes = [lo + i * h for i in range(n)]
    weights = [h / 3.0 * (1 if i in (0, n - 1) else (4 if i % 2 else 2)) for i in range(n)]
    return nodes, weights


def _pdf(x: float) -> float:
    return math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def _crossing(
    prev: tuple[list[float], list[float], list[float]] | None,
    t: float,
    dt: float,
    c: float,
    drift: float = 0.0,
) -> float:
    """P(no earlier crossing, Z at ``t`` >= c); ``prev``: the earlier look's grid (nodes of the
    score S = Z sqrt(t), Simpson weights, sub-density of S on the continuation region).
    ``drift``: the score's mean at information time 1 (S(t) = drift t + Brownian motion)."""
    b = c * math.sqrt(t)
    if prev is None:
        return 1.0 - _N.cdf((b - drift * t) / math.sqrt(t))
    nodes, weights, dens = prev
    sd = math.sqrt(dt)
    move = drift * dt
    return sum(w * g * (1.0 - _N.cdf((b - u - move) / sd)) for u, w, g in zip(nodes, weights, dens))


def _density(
    prev, t: float, dt: float, c: float, drift: float = 0.0
) -> tuple[list[float], list[float], list[float]]:
    """The sub-density of the score at ``t`` on its continuation region S < c sqrt(t)."""
    b = c * math.sqrt(t)
    lo = drift * t - _TAIL * math.sqrt(t)
    nodes, weights = _simpson(lo, max(b, lo + 1e-9), _GRID)
    if prev is None:
        sd = math.sqrt(t)
        return nodes, weights, [_pdf((s - drift * t) / sd) / sd for s in nodes]
    pn, pw, pg = prev
    sd = math.sqrt(dt)
    move = drift * dt
    mass = [w * g for w, g in zip(pw, pg)]
    dens = [sum(m * _pdf((s - u - move) / sd) for u, m in zip(pn, mass)) / sd for s in nodes]
    return nodes, weights, dens


@functools.lru_cache(maxsize=512)
def boundaries(times: tuple[float, ...], alpha: float, spending: str = "obf", final: bool = False) -> tuple:
    """One-sided boundaries ``c_k`` (z scale) at information ``times`` (increasing, in (0, 1]);
    the cumulative level at look k is the spending function at ``times[k]``, and at the last
    look ``alpha`` itself when ``final`` (a look that ends the test before the horizon).

    A look whose increment is below 1e-15 gets an infinite boundary (it cannot reject)."""
    if any(b <= a for a, b in itertools.pairwise(times)) or not times or times[0] <= 0 or times[-1] > 1:
        raise ValueError(f"information times must increase within (0, 1], not {times}")
    out: list[float] = []
    prev = None
    before, spent_before = 0.0, 0.0
    for i, t in enumerate(times):
        goal = alpha if final and i == len(times) - 1 else spent(t, alpha, spending)
        step = goal - spent_before
        dt = t - before
        if step < 1e-15:
            c = math.inf
        else:
            lo, hi = -1.0, 12.0
            if _crossing(prev, t, dt, hi) > step:
                c = hi
            else:
                for _ in range(60):
                    mid = 0.5 * (lo + hi)
                    if _crossing(prev, t, dt, mid) > step:
                        lo = mid
                    else:
                        hi = mid
                    if hi - lo < 1e-7:
                        break
                c = 0.5 * (lo + hi)
        out.append(c)
        prev = _density(prev, t, dt, min(c, 12.0))
        before, spent_before = t, goal
    return tuple(out)


def nominal_levels(
    times: tuple[float, ...], alpha: float, spending: str = "obf", final: bool = False
) -> tuple:
    """The one-sided nominal p-value each look rejects below: ``1 - Phi(c_k)``."""
    return tuple(0.0 if math.isinf(c) else 1.0 - _N.cdf(c) for c in boundaries(times, alpha, spending, final))


T_PATHS = 20000  # simulated null paths behind t_levels
_T_SEED = 40


@functools.lru_cache(maxsize=1024)
def t_levels(
    rounds: tuple[int, ...],
    horizon: int,
    dfs: tuple[int, ...],
    alpha: float,
    spending: str = "obf",
    final: bool = False,
) -> tuple[float, ...]:
    """One-sided nominal levels for a *t* statistic at looks after ``rounds`` (of ``horizon``),
    such that the chance of crossing on either side by a look is twice the spending function at
    its information time ``round / horizon`` (``alpha`` is one side's level; at the last look
    all of it when ``final``).

    ``dfs``: the residual degrees of freedom at each look. The z boundaries' levels taken over
    to the t statistic (the significance-level approach) let identical points through up to
    6.7 % of the time at 5 % when the looks have 1-5 df (bench/bounded_sim.py): each look's
    variance estimate makes successive t statistics less alike than successive z statistics.
    So the levels are calibrated on the null process itself, ``T_PATHS`` seeded paths: per round
    one paired difference N(0, 1) (the two points' contrast within the round), the t statistic
    from their running mean and sum of squares, and where a look has more df than the pairs
    give (other points' runs pool into the spread) an independent chi-square for the rest. That
    is exact for two points and approximate for more; a level is then the t tail beyond the
    look's threshold on |T|."""
    from patchkit.profile.verdict import t_sf

    if len(rounds) != len(dfs) or any(d < 1 for d in dfs) or list(rounds) != sorted(set(rounds)):
        raise ValueError(f"one df (>= 1) per look, rounds increasing: {rounds} and {dfs}")
    if rounds[0] < 1 or rounds[-1] > horizon:
        raise ValueError(f"looks after rounds 1..{horizon}, not {rounds}")
    rng = random.Random(_T_SEED)
    n = T_PATHS
    mean = [0.0] * n
    m2 = [0.0] * n
    extra = [0.0] * n
    alive = list(range(n))
    crossed, done, extra_df = 0, 0, 0
    out = []
    for i, (k, df) in enumerate(zip(rounds, dfs)):
        pairs = min(k, df + 1)  # paired differences behind this look
        more = df - (pairs - 1) - extra_df  # df beyond them, new since the last look
        stats = []
        for j in alive:
            mu, s2 = mean[j], m2[j]
            for c in range(done + 1, pairs + 1):
                x = rng.gauss(0.0, 1.0)
                delta = x - mu
                mu += delta / c
                s2 += delta * (x - mu)
            mean[j], m2[j] = mu, s2
            if more > 0:
                extra[j] += 2.0 * rng.gammavariate(more / 2.0, 1.0)
            sd = math.sqrt((s2 + extra[j]) / df)
            stats.append((abs(mu) * math.sqrt(pairs) / sd if sd > 0 else math.inf, j))
        done = max(done, pairs)
        extra_df += max(0, more)
        goal = alpha if final and i == len(rounds) - 1 else spent(k / horizon, alpha, spending)
        new = math.floor(2.0 * goal * n + 1e-9) - crossed
        if new <= 0:
            # less than one path's worth of level: the exact z boundary's nominal level
            # (recursive integration), never 0, so that every look can stop
            times = tuple(r / horizon for r in rounds[: i + 1])
            out.append(nominal_levels(times, alpha, spending, final and i == len(rounds) - 1)[-1])
            continue
        stats.sort(reverse=True)
        q = 0.5 * (stats[new - 1][0] + stats[new][0]) if new < len(stats) else 0.0
        out.append(t_sf(q, df))
        cut = {j for _s, j in stats[:new]}
        alive = [j for j in alive if j not in cut]
        crossed += new
    return tuple(out)


def look_times(rounds: int, horizon: int, first: int = 2) -> tuple[float, ...]:
    """Information times of the looks after rounds ``first .. rounds`` of ``horizon``."""
    return tuple(k / horizon for k in range(first, min(rounds, horizon) + 1))


def crossing_probabilities(times: tuple[float, ...], bounds: tuple[float, ...], drift: float) -> tuple:
    """P(the first crossing of the upper boundary is at look k), per look: the score
    S(t) = drift t + W(t) looked at at ``times`` against ``bounds`` (z scale, as
    :func:`boundaries` gives them). With ``drift`` 0 these are the levels spent; with the
    drift of a true difference, the test's power spread over its looks (the same recursive
    integration, Jennison & Turnbull 2000, ch. 19)."""
    out = []
    prev = None
    before = 0.0
    for t, c in zip(times, bounds):
        dt = t - before
        out.append(0.0 if math.isinf(c) else _crossing(prev, t, dt, c, drift))
        prev = _density(prev, t, dt, min(c, 12.0), drift)
        before = t
    return tuple(out)


def z_design(horizon: int, effect: float, alpha: float, spending: str = "pocock", first: int = 1) -> dict:
    """The z test of a known spread over ``horizon`` rounds (looks after rounds ``first`` ..
    ``horizon``): its boundaries, and, for a true difference of ``effect`` standard errors of
    one round's contrast (the difference over the spread of one round's paired difference),
    its power and the expected rounds. ``alpha``: one side's level. Computed, not sampled."""
    times = look_times(horizon, horizon, first)
    bounds = boundaries(times, alpha, spending)
    drift = effect * math.sqrt(horizon)
    cross = crossing_probabilities(times, bounds, drift)
    power = sum(cross)
    rounds = list(range(first, horizon + 1))
    expected = sum(k * p for k, p in zip(rounds, cross)) + horizon * (1.0 - power)
    return {"horizon": horizon, "bounds": bounds, "power": power, "expected_rounds": expected}
