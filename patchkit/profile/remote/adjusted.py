"""Where each start's time went, and a verdict with the prefill cycles' start-to-start cost out.

Per run (a server start): the benchmark's wall time split into its decode cycles, its prefill
cycles and the rest (the client's own time, idle), from the report's ``time_split`` and the
benchmark's duration; ``time_parts`` below. Over a sweep, :func:`spread_by_part` (spread.py)
says which part carries the spread between starts of a point.

The adjusted verdict. Between identical starts on the H200 the prefill cycles' host cost moved
most (a mean prefill period of 20 against 37 ms: the prefill runs eagerly, outside CUDA
graphs), so each run's time is recomputed with its prefill cycles costed at the prefill period
pooled over the whole sweep (every run's prefill time over every run's prefill cycles):

    T' = T - prefill_s + prefill_cycles x pooled period,   adjusted tok/s = tok/s x T / T'

That is a covariate adjustment with a known coefficient (Cox 1958, "Planning of Experiments",
ch. 4; the prefill period is the concomitant variable and its effect on the time is exact
arithmetic, not a fitted slope), so it removes the nuisance without spending a degree of
freedom. It keeps each run's own number of prefill cycles (which the configuration changes:
fewer steps, more decode cycles, other finishing times) and replaces only its price. It is
valid only where the configuration does not change that price: the prefill period is tested
by point first (log period = point + round [+ GPU/host], the rounds as blocks, an F test of
the point effects at PREFILL_ALPHA); where it differs, or cannot be tested, the raw verdict
decides. The adjusted verdict is the same test as the raw one (bounded, anytime or fixed N)
over the adjusted tok/s, over the same rounds. A sequential sweep (--until decided, --budget)
asks choose_estimator after every round and its drops and stop follow the verdict it names;
every look judges one verdict per round, and a look that ended the sweep early for a reason of
its own spends only what the horizon allows there. The final verdict -- adjusted or raw, as the
prefill test says -- is judged at alpha / 2 either way (adjusted_verdict says why), so following
either one names a wrong best in at most alpha of sweeps (Bonferroni over the two).
"""

from __future__ import annotations

import math
from typing import Any

from patchkit.report.stats import f_sf

PREFILL_ALPHA = 0.10  # the prefill period's test by point: lenient, so a doubt keeps the raw verdict


def time_parts(run: dict) -> dict | None:
    """``{decode_s, prefill_s, rest_s, prefill_cycles, prefill_period_ms}`` of one run, from its
    ``time_split`` and benchmark ``duration_s`` (rest None without a duration, the period None
    without prefill cycles); None without a time split."""
    split = run.get("time_split") or {}
    dec, pre = split.get("decode"), split.get("prefill") or {"cycles": 0, "total_s": 0.0}
    if not dec:
        return None
    duration = run.get("duration_s")
    cycles_s = dec["total_s"] + pre["total_s"]
    return {
        "decode_s": dec["total_s"],
        "prefill_s": pre["total_s"],
        "rest_s": None if duration is None else max(0.0, duration - cycles_s),
        "prefill_cycles": pre["cycles"],
        "prefill_period_ms": pre["total_s"] / pre["cycles"] * 1e3 if pre["cycles"] else None,
    }


def pooled_period_s(rows: list[dict]) -> float | None:
    """Every successful run's prefill time over every one's prefill cycles (seconds a cycle)."""
    total = cycles = 0.0
    for row in rows:
        for run in row["runs"]:
            parts = run.get("time_parts")
            if run["ok"] and parts:
                total += parts["prefill_s"]
                cycles += parts["prefill_cycles"]
    return total / cycles if cycles else None


def adjusted_tokens_per_s(run: dict, period_s: float) -> float | None:
    """The run's tok/s with its prefill cycles costed at ``period_s`` (module doc)."""
    parts = run.get("time_parts")
    tps = run.get("tokens_per_s")
    if not run["ok"] or not parts or not tps:
        return None
    whole = run.get("duration_s") or (parts["decode_s"] + parts["prefill_s"])
    new = whole - parts["prefill_s"] + parts["prefill_cycles"] * period_s
    return tps * whole / new if new > 0 else None


def prefill_test(rows: list[dict]) -> dict | None:
    """Whether the prefill period differs by point: the F test of the point effects in the
    least-squares fit of log period = point + round (+ block). None below one residual df or
    two points."""
    from patchkit.profile.sequential import inverse, round_fit

    obs = []
    for row in rows:
        for run in row["runs"]:
            parts = run.get("time_parts")
            if run["ok"] and parts and parts["prefill_period_ms"]:
                obs.append((row["label"], run["rep"], run.get("block"), math.log(parts["prefill_period_ms"])))
    fit = round_fit(obs)
    if fit is None or fit.df < 1 or not fit.order:
        return None
    inv = inverse(fit.cov)
    if inv is None:
        return None
    beta = [fit.effects[p] for p in fit.order]
    k = len(beta)
    quad = sum(beta[i] * inv[i][j] * beta[j] for i in range(k) for j in range(k))
    sigma2 = fit.ss / fit.df
    if sigma2 <= 0:
        return {"f": math.inf if quad > 0 else 0.0, "df": [k, fit.df], "p": 0.0 if quad > 0 else 1.0}
    f = quad / k / sigma2
    return {"f": f, "df": [k, fit.df], "p": f_sf(f, k, fit.df)}


def choose_estimator(rows: list[dict], alpha: float) -> dict[str, Any] | None:
    """Which tok/s decides, as far as the runs go: {prefill_period_ms, tokens_per_s (adjusted,
    label -> per run), prefill_test, alpha (each verdict's: alpha / 2), decided_by, why}. None
    when no run has a prefill cycle: the raw verdict alone, at alpha. A sequential sweep asks
    after every round and its rounds follow the answer (drops and stop); adjusted_verdict asks
    at the end."""
    period = pooled_period_s(rows)
    if period is None:
        return None
    runs = {
        row["label"]: [adjusted_tokens_per_s(r, period) for r in row["runs"]] for row in rows if row["runs"]
    }
    test = prefill_test(rows)
    doc: dict[str, Any] = {
        "prefill_period_ms": period * 1e3,
        "tokens_per_s": runs,
        "prefill_test": test,
        "alpha": alpha / 2.0,
        "method": "each run's prefill cycles costed at the prefill period pooled over the sweep",
    }
    if test is None:
        doc.update(decided_by="raw", why="the prefill period by point could not be tested (too few runs)")
    elif test["p"] < PREFILL_ALPHA:
        doc.update(
            decided_by="raw",
            why=f"the prefill period differs by point (F test p = {test['p']:.2g} < {PREFILL_ALPHA:g}): "
            "the configuration changes what the adjustment pools",
        )
    else:
        doc.update(
            decided_by="adjusted",
            why=f"the prefill period does not differ by point (F test p = {test['p']:.2g} >= {PREFILL_ALPHA:g})",
        )
    return doc


def adjusted_verdict(rows: list[dict], decide_runs, alpha: float, decide_raw=None) -> dict[str, Any] | None:
    """sweep.json ``adjusted``: the pooled period, each run's adjusted tok/s, the prefill test,
    and the final verdict: ``decided_by`` "adjusted" where the prefill period does not differ by
    point (p >= PREFILL_ALPHA), else "raw", with ``why``; ``best`` is that verdict's.

    ``decide_runs(runs by label, alpha)`` is the sweep's own test (bounded, anytime or fixed N);
    ``decide_raw`` the same for the raw tok/s where it differs (a spread known per estimator)
    over the same rounds. Both candidates are judged at alpha / 2 (``verdict`` and
    ``raw_verdict``): the prefill test is not independent of the raw verdict -- a raw difference
    that prefill luck made is just what makes the periods look different by point -- so
    choosing between two verdicts at alpha each named a best among identical points in 8 % of
    simulated sweeps (bench/adjusted_sim.py); by Bonferroni over the two, at most alpha. None
    when no run has a prefill cycle (nothing to adjust)."""
    doc = choose_estimator(rows, alpha)
    if doc is None:
        return None
    raw = {
        row["label"]: [r.get("tokens_per_s") if r["ok"] else None for r in row["runs"]]
        for row in rows
        if row["runs"]
    }
    doc["verdict"] = decide_runs(doc["tokens_per_s"], alpha / 2.0)
    doc["raw_verdict"] = (decide_raw or decide_runs)(raw, alpha / 2.0)
    chosen = doc["verdict"] if doc["decided_by"] == "adjusted" else doc["raw_verdict"]
    doc["best"] = (chosen or {}).get("best")
    return doc
