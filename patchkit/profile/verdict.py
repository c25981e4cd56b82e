"""Which sweep point is best, and whether the repetitions can tell: intervals and a verdict.

Pure Python (``math`` and ``statistics`` only); used by ``profile.sweep`` and
``profile.remote --matrix`` on the throughputs of repeated measured passes (one value per
repetition and point).

The method, and why:

* **Log scale.** Throughput noise between server starts is multiplicative (a slower kernel
  choice or a colder cache costs a fraction, not a fixed number of tok/s), and what a reader
  wants is a ratio. Every test and interval works on ``log(tok/s)``; intervals are mapped
  back with ``exp``, so they are intervals of the geometric mean and of ratios.
* **Welch's t** (unequal variances, Welch-Satterthwaite degrees of freedom) between two
  points' log throughputs. At N = 3..5 repetitions a rank test (Mann-Whitney) cannot reach
  p < 0.05 at all with N = 3 per side, and a bootstrap of three values resamples the same
  three numbers; the t distribution uses the spread honestly at small N. The Student-t CDF
  comes from the regularized incomplete beta function (patchkit.report.stats).
* **The verdict.** The point with the highest mean log throughput is the *top*. It is named
  ``best`` only when it beats **every** other point (hence also the runner-up) in a one-sided
  Welch test at level ``alpha / k`` (k = number of points compared). This controls the chance
  of naming a best point that is not better than all others at ``alpha``, whatever the true
  throughputs: a wrong claim needs the named point X to beat some point Y with
  ``mu_Y >= mu_X``, which happens with probability at most ``alpha / k`` for each of the k
  possible X (Bonferroni over the k candidates; choosing the top from the data is covered,
  because every X is counted). Identical points are therefore called different in at most
  ``alpha`` (5%) of sweeps; in practice far fewer, since X must beat all others at once.
* Otherwise ``indistinguishable`` lists the top point and every point whose one-sided test
  against it is not significant at ``alpha / k``: the data cannot order them.
* **Intervals**: a row's ``tokens_per_s_ci`` is the 95% t-interval of its mean log
  throughput (a geometric-mean interval, marginal: not corrected for the number of rows);
  ``ratio_ci`` is the 95% Welch interval of the difference of mean logs, exponentiated.
  With one repetition there is no interval (None) and no verdict can be significant.

Power (bench/verdict_power.py prints the table; tests/profile/test_verdict.py checks the bounds):
with a 2% coefficient of variation between server starts, 30% apart is significant at N = 3
in every sweep; 5% apart between two points is called in about half the sweeps at N = 3 and
in 88% at N = 5 (``DEFAULT_REPEAT``, the remote default; profile.sweep's passes in one warm
process default to 3). With more points the correction is conservative (identical points:
under 1% at k >= 3).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from patchkit.report.stats import betainc, t_ppf, t_sf
from patchkit.settings import REMOTE_REPEAT

__all__ = ["betainc", "t_ppf", "t_sf"]  # the t distribution, from patchkit.report.stats

DEFAULT_REPEAT = REMOTE_REPEAT  # profile.remote --matrix's server starts per point (the option table)
DEFAULT_ALPHA = 0.05
CONFIDENCE = 0.95
METHOD = (
    "one-sided Welch t on log tok/s, top point against every other point at "
    "alpha/k (Bonferroni over the k points)"
)


# ---- one point, two points ----------------------------------------------------------------------


def _logs(values) -> list[float]:
    return [math.log(v) for v in values if v is not None and v > 0]


def interval(values, confidence: float = CONFIDENCE) -> list[float] | None:
    """[lo, hi]: the t-interval of the geometric mean of ``values`` (None below 2 values)."""
    logs = _logs(values)
    n = len(logs)
    if n < 2:
        return None
    mean, sd = statistics.fmean(logs), statistics.stdev(logs)
    half = t_ppf(0.5 + confidence / 2.0, n - 1) * sd / math.sqrt(n)
    return [math.exp(mean - half), math.exp(mean + half)]


def welch(a, b) -> dict | None:
    """Welch's t for mean log(a) - mean log(b): {diff, se, df, t}; None below 2 values a side."""
    la, lb = _logs(a), _logs(b)
    if len(la) < 2 or len(lb) < 2:
        return None
    va, vb = statistics.variance(la) / len(la), statistics.variance(lb) / len(lb)
    diff = statistics.fmean(la) - statistics.fmean(lb)
    se = math.sqrt(va + vb)
    if se == 0.0:  # every repetition gave the same number on both sides
        t = 0.0 if diff == 0.0 else math.copysign(math.inf, diff)
        return {"diff": diff, "se": 0.0, "df": float(len(la) + len(lb) - 2), "t": t}
    df = (va + vb) ** 2 / (
        (va * va / (len(la) - 1) if va else 0.0) + (vb * vb / (len(lb) - 1) if vb else 0.0)
    )
    return {"diff": diff, "se": se, "df": df, "t": diff / se}


def p_greater(a, b) -> float | None:
    """One-sided p-value of "a is faster than b" (Welch on logs); None when it cannot be tested."""
    w = welch(a, b)
    return None if w is None else t_sf(w["t"], w["df"])


def ratio_interval(a, b, confidence: float = CONFIDENCE) -> list[float] | None:
    """[lo, hi] of the ratio of geometric means a / b (Welch interval on logs)."""
    w = welch(a, b)
    if w is None:
        return None
    half = 0.0 if w["se"] == 0.0 else t_ppf(0.5 + confidence / 2.0, w["df"]) * w["se"]
    return [math.exp(w["diff"] - half), math.exp(w["diff"] + half)]


def repetition_fields(values) -> dict:
    """A row's repetition fields: tokens_per_s_median, tokens_per_s_ci, repeats."""
    kept = [v for v in values if v is not None]
    return {
        "tokens_per_s_median": statistics.median(kept) if kept else None,
        "tokens_per_s_ci": interval(kept),
        "repeats": list(values),
    }


# ---- the verdict --------------------------------------------------------------------------------


def decide_fixed(samples: dict, alpha: float = DEFAULT_ALPHA) -> dict:
    """The fixed-sample verdict: one look over ``{label: [tok/s per repetition]}`` once every
    repetition has run (see the module docstring; a sweep judged after every round uses
    patchkit.profile.sequential.decide_sequential).

    Returns {best, significant, indistinguishable, method, alpha, top, p_values, note}:
    ``p_values`` maps every other label to the one-sided p of "top beats it" (None when it
    could not be tested); ``top`` is the point with the highest mean log throughput."""
    measured = {label: _logs(v) for label, v in samples.items()}
    measured = {label: v for label, v in measured.items() if v}
    p_values: dict[str, float | None] = {}
    doc: dict[str, Any] = {
        "best": None,
        "significant": False,
        "indistinguishable": [],
        "method": METHOD,
        "alpha": alpha,
        "top": None,
        "p_values": p_values,
        "note": None,
    }
    if not measured:
        doc["note"] = "no point was measured"
        return doc
    top = max(measured, key=lambda label: statistics.fmean(measured[label]))
    doc["top"] = top
    k = len(measured)
    if k == 1:  # no runner-up: nothing is decided (the ratio to a baseline has its interval)
        doc.update(indistinguishable=[top], note="one point measured: nothing to compare it with")
        return doc
    level = alpha / k
    others = [label for label in measured if label != top]
    values = {label: [math.exp(x) for x in logs] for label, logs in measured.items()}
    for label in others:
        p_values[label] = p_greater(values[top], values[label])
    beaten = [label for label in others if (p := p_values[label]) is not None and p < level]
    doc["indistinguishable"] = [top] + [label for label in others if label not in beaten]
    if len(beaten) == len(others):
        doc.update(best=top, significant=True)
    elif any(len(v) < 2 for v in measured.values()):
        doc["note"] = "fewer than 2 repetitions of some point: nothing can be called significant"
    return doc


def rotation(labels: list, repeat: int) -> list[tuple[int, Any]]:
    """The run order: repetition r runs the points rotated by r (A B C, B C A, C A B, ...),
    so that no point always runs first (coldest caches) or last (most drift)."""
    order = []
    n = len(labels)
    for rep in range(repeat):
        order += [(rep, labels[(rep + i) % n]) for i in range(n)]
    return order


def title_line(verdict: dict) -> str:
    """A few words for a chart title."""
    if verdict.get("significant") and verdict.get("best") is not None:
        return f"verdict: {verdict['best']} is best (alpha {verdict['alpha']:g})"
    names = verdict.get("indistinguishable") or []
    shown = ", ".join(names[:4]) + (f" +{len(names) - 4}" if len(names) > 4 else "")
    return f"verdict: no significant best; indistinguishable: {shown or '-'}"


def describe(verdict: dict) -> str:
    """One line for sweep.txt/sweep.md."""
    if verdict.get("significant") and verdict.get("best") is not None:
        worst_p = max((p for p in verdict["p_values"].values() if p is not None), default=0.0)
        return (
            f"verdict: best {verdict['best']} -- faster than every other point "
            f"(one-sided p <= {worst_p:.2g} < alpha/k = "
            f"{verdict['alpha'] / max(1, len(verdict['p_values']) + 1):.3g})"
        )
    names = ", ".join(verdict.get("indistinguishable") or []) or "-"
    extra = f"; {verdict['note']}" if verdict.get("note") else ""
    return f"verdict: no significant best; indistinguishable from the top: {names}{extra}"


# ---- the per-phase companion ----------------------------------------------------------------------

CYCLE = "(cycle)"  # the whole decode cycle, beside its phases
BLOCKED_DF = 4  # the per-phase model is blocked by round from this many degrees of freedom on
PHASE_METHOD = (
    "t on log ms with each phase's start-to-start variance from every point (blocked by round "
    "where the design allows), Bonferroni over every (point, phase) pair"
)


def _phase_spread(logs: dict[str, list[tuple[Any, float]]]) -> dict | None:
    """The start-to-start variance of one phase's log ms, from every point of the sweep that
    timed it (``logs``: label -> [(round, log ms)]): {test, s2, df, rounds}. Blocked by round
    (two-way additive model, points x rounds, its residual variance) where every point ran once
    in each of the same rounds and that leaves BLOCKED_DF or more degrees of freedom; else pooled
    within points (one-way). The choice follows the design alone, never the values: at the
    Bonferroni level a t quantile at 2 degrees of freedom is about 3x the one at 4, more than a
    round's shared shift costs a one-way model. The variance of one phase is assumed the same at every point (the same
    kernel or host path, another configuration), not the same as other phases': the spread
    between starts runs from 0.3 % for a device time to 5 % for a host-side phase, and a
    variance borrowed across phases calls the noisy ones different (bench/phase_verdict_sim.py).
    None below one degree of freedom."""
    rounds = [[rd for rd, _ in v] for v in logs.values()]
    k = len(logs)
    complete = (
        all(rd is not None for rs in rounds for rd in rs)
        and all(sorted(rs) == sorted(rounds[0]) and len(set(rs)) == len(rs) for rs in rounds)
        and len(rounds[0]) >= 2
    )
    if complete and (k - 1) * (len(rounds[0]) - 1) >= BLOCKED_DF:
        cells = {(label, rd): x for label, v in logs.items() for rd, x in v}
        by_point = {label: statistics.fmean(x for _, x in v) for label, v in logs.items()}
        by_round = {rd: statistics.fmean(cells[(label, rd)] for label in logs) for rd in rounds[0]}
        grand = statistics.fmean(cells.values())
        df = (k - 1) * (len(rounds[0]) - 1)
        ss = sum((x - by_point[label] - by_round[rd] + grand) ** 2 for (label, rd), x in cells.items())
        return {"test": "blocked by round", "s2": ss / df, "df": df}
    df = sum(len(v) - 1 for v in logs.values())
    if df < 1:
        return None
    ss = sum((x - statistics.fmean(y for _, y in v)) ** 2 for v in logs.values() for _, x in v)
    return {"test": "pooled over points", "s2": ss / df, "df": df}


def phase_comparison(
    phase_ms: dict, leader: str, alpha: float = DEFAULT_ALPHA, rounds: dict | None = None
) -> dict | None:
    """Which phases differ between ``leader`` and each other point.

    ``phase_ms``: label -> one {phase: ms per decode cycle} per successful run (``CYCLE`` for
    the whole cycle); ``rounds`` (optional, the same shape): label -> the round of each run.
    For every other point and every phase both sides timed: the medians, the ratio of
    geometric means point / leader and its interval at confidence 1 - alpha/m, m the (point,
    phase) pairs compared over the whole sweep (Bonferroni over every pair: the chance that any
    phase of any point is called different when none is stays below alpha), and ``differs`` when
    the interval leaves 1 out.

    Each interval is a t interval of the difference of mean log ms whose variance is the
    phase's own, estimated from every point of the sweep (``_phase_spread``: blocked by round
    where the design allows, else pooled within points), so five points of two starts give the
    phase 5 degrees of freedom, not Welch's one. ``test`` says which model, ``df`` its degrees
    of freedom. None when the leader has no runs."""
    base = phase_ms.get(leader) or []
    if not base:
        return None
    given = rounds or {}

    def aligned(label: str) -> list:
        rs = given.get(label) or []
        return rs if len(rs) == len(phase_ms[label]) else [None] * len(phase_ms[label])

    compared: dict[str, list[str]] = {}
    for label, runs in phase_ms.items():
        if label == leader or not runs:
            continue
        compared[label] = [
            n
            for n in dict.fromkeys(n for r in base for n in r)
            if any(r.get(n) for r in runs) and any(r.get(n) for r in base)
        ]
    m = sum(len(names) for names in compared.values())
    confidence = 1.0 - alpha / max(1, m)
    spreads: dict[str, dict | None] = {}
    for name in dict.fromkeys(n for names in compared.values() for n in names):
        logs = {
            label: [(rd, math.log(r[name])) for rd, r in zip(aligned(label), phase_ms[label]) if r.get(name)]
            for label in [leader, *(lb for lb, names in compared.items() if name in names)]
        }
        spreads[name] = _phase_spread(logs)
    points: dict[str, dict] = {}
    for label, names in compared.items():
        phases = {}
        for name in names:
            ours = [r[name] for r in phase_ms[label] if r.get(name)]
            theirs = [r[name] for r in base if r.get(name)]
            diff = statistics.fmean(_logs(ours)) - statistics.fmean(_logs(theirs))
            spread = spreads[name]
            ci = None
            if spread and spread["s2"] > 0:
                se = math.sqrt(spread["s2"] * (1.0 / len(ours) + 1.0 / len(theirs)))
                half = t_ppf(0.5 + confidence / 2.0, spread["df"]) * se
                ci = [math.exp(diff - half), math.exp(diff + half)]
            phases[name] = {
                "ms": statistics.median(ours),
                "leader_ms": statistics.median(theirs),
                "ratio": math.exp(diff),
                "ratio_ci": ci,
                "confidence": confidence,
                "test": spread["test"] if spread else None,
                "df": spread["df"] if spread else None,
                "differs": bool(ci and (ci[0] > 1.0 or ci[1] < 1.0)),
                "runs": [len(ours), len(theirs)],
            }
        points[label] = phases
    return {"leader": leader, "alpha": alpha, "pairs": m, "points": points, "method": PHASE_METHOD}


def describe_phases(comparison: dict | None, limit: int = 4) -> list[str]:
    """A line per compared point: the phases that differ from the leader's (largest change
    first, at most ``limit``), with their ratios and intervals."""
    if not comparison:
        return []
    lines = []
    for label, phases in comparison["points"].items():
        differ = sorted(
            (n for n, d in phases.items() if d["differs"]), key=lambda n: -abs(math.log(phases[n]["ratio"]))
        )
        same = [n for n, d in phases.items() if d["ratio_ci"] and not d["differs"]]
        shown = [
            f"{n} {phases[n]['ms']:.3g} vs {phases[n]['leader_ms']:.3g} ms "
            f"({phases[n]['ratio']:.3f}x [{phases[n]['ratio_ci'][0]:.3f}, {phases[n]['ratio_ci'][1]:.3f}])"
            for n in differ[:limit]
        ]
        more = f" +{len(differ) - limit} more" if len(differ) > limit else ""
        what = ("differ: " + "; ".join(shown) + more) if shown else "no phase differs"
        if not any(d["ratio_ci"] for d in phases.values()):
            what = "fewer than 2 timed runs a side: no interval"
        lines.append(f"  {label}: {what}" + (f" (same: {len(same)} phase(s))" if shown and same else ""))
    return lines
