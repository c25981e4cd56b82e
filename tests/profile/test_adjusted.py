"""profile.remote sweeps: where each start's time went, and the verdict with the prefill cycles
costed at the sweep's pooled period (patchkit.profile.remote.adjusted), on synthetic runs."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy import stats

from patchkit.profile.remote.adjusted import (
    PREFILL_ALPHA,
    adjusted_tokens_per_s,
    adjusted_verdict,
    pooled_period_s,
    prefill_test,
    time_parts,
)
from patchkit.profile.remote.spread import spread_by_part
from patchkit.profile.verdict import decide_fixed


def run(rep, tokens=10_000.0, decode_s=8.0, prefill_cycles=100, period_s=0.02, rest_s=0.5, ok=True):
    """One start: its benchmark moved ``tokens`` tokens in decode + prefill + rest seconds."""
    duration = decode_s + prefill_cycles * period_s + rest_s
    doc = {
        "ok": ok,
        "rep": rep,
        "block": None,
        "tokens_per_s": tokens / duration,
        "duration_s": duration,
        "time_split": {
            "decode": {"cycles": 500, "total_s": decode_s},
            "prefill": {"cycles": prefill_cycles, "total_s": prefill_cycles * period_s},
        },
    }
    doc["time_parts"] = time_parts(doc)
    return doc


def sweep_rows(rng, points, starts, decode_sd=0.01, period_sd=0.3, period_of=None):
    """label -> decode seconds (a faster point decodes in less); each start's prefill period
    drawn lognormal around 20 ms (the start-to-start nuisance), per point where given."""
    rows = []
    for label, decode_s in points.items():
        base = (period_of or {}).get(label, 0.02)
        runs = [
            run(
                r + 1,
                decode_s=decode_s * math.exp(rng.gauss(0, decode_sd)),
                period_s=base * math.exp(rng.gauss(0, period_sd)),
            )
            for r in range(starts)
        ]
        rows.append({"label": label, "runs": runs})
    return rows


def test_a_start_splits_into_decode_prefill_and_rest_and_the_adjustment_is_arithmetic():
    r = run(1, decode_s=8.0, prefill_cycles=100, period_s=0.03, rest_s=0.5)
    assert r["time_parts"] == pytest.approx(
        {"decode_s": 8.0, "prefill_s": 3.0, "rest_s": 0.5, "prefill_cycles": 100, "prefill_period_ms": 30.0}
    )
    # at a pooled 20 ms the same start would have taken 11.5 - 3 + 2 = 10.5 s
    assert adjusted_tokens_per_s(r, 0.02) == pytest.approx(10_000 / 10.5)
    rows = [{"label": "a", "runs": [r, run(2, period_s=0.01)]}]
    assert pooled_period_s(rows) == pytest.approx((3.0 + 1.0) / 200)
    assert time_parts({"time_split": None}) is None


def test_the_prefill_test_is_the_f_test_of_the_point_effects():
    rng = random.Random(3)
    rows = sweep_rows(rng, {"a": 8.0, "b": 8.0, "c": 8.0}, 4, period_of={"c": 0.03})
    got = prefill_test(rows)
    assert got is not None and got["df"] == [2, 6]
    # the same F from the restricted and unrestricted least squares (numpy), and its tail (scipy)
    obs = [
        (row["label"], x["rep"], math.log(x["time_parts"]["prefill_period_ms"]))
        for row in rows
        for x in row["runs"]
    ]
    labels, reps = ["a", "b", "c"], [1, 2, 3, 4]
    y = np.array([o[2] for o in obs])
    full = np.array([[float(o[0] == p) for p in labels] + [float(o[1] == r) for r in reps[1:]] for o in obs])
    rounds = np.array([[1.0] + [float(o[1] == r) for r in reps[1:]] for o in obs])

    def rss(x):
        beta, *_ = np.linalg.lstsq(x, y, rcond=None)
        return float(((y - x @ beta) ** 2).sum())

    f = ((rss(rounds) - rss(full)) / 2) / (rss(full) / 6)
    assert got["f"] == pytest.approx(f, rel=1e-9)
    assert got["p"] == pytest.approx(stats.f.sf(f, 2, 6), rel=1e-7)  # F itself: tests/report/test_stats.py


def test_the_adjusted_verdict_decides_where_the_prefill_cost_drowns_a_5_percent_difference():
    """Two points 5 % apart in decode time, the prefill period of each start drawn 30 % around
    20 ms: the raw Welch verdict over 4 starts a point rarely decides, the adjusted one does, and
    it is the one that decides (the period does not differ by point)."""
    raw_hits = adj_hits = 0
    sweeps = 60
    for seed in range(sweeps):
        rng = random.Random(seed)
        rows = sweep_rows(rng, {"fast": 8.0 / 1.05, "slow": 8.0}, 4)
        doc = adjusted_verdict(rows, fixed_n, 0.05)
        assert doc is not None and doc["prefill_period_ms"] == pytest.approx(20, rel=0.4)
        assert doc["alpha"] == 0.025 and doc["raw_verdict"]["alpha"] == 0.025
        raw_hits += (
            decide_fixed({r["label"]: [x["tokens_per_s"] for x in r["runs"]] for r in rows})["best"] == "fast"
        )
        adj_hits += doc["decided_by"] == "adjusted" and doc["best"] == "fast"
    assert raw_hits / sweeps < 0.5 and adj_hits / sweeps > 0.75


def fixed_n(runs, alpha):
    v = decide_fixed({k: [x for x in xs if x is not None] for k, xs in runs.items()}, alpha=alpha)
    return {"best": v["best"], "alpha": alpha}


def test_a_point_that_changes_the_prefill_period_keeps_the_raw_verdict():
    rng = random.Random(9)
    rows = sweep_rows(rng, {"a": 8.0, "b": 8.0}, 5, period_sd=0.05, period_of={"b": 0.04})
    doc = adjusted_verdict(rows, fixed_n, 0.05)
    assert doc["prefill_test"]["p"] < PREFILL_ALPHA
    assert doc["decided_by"] == "raw" and "differs by point" in doc["why"]
    # the raw verdict's best (b pays 2 s more prefill a start: a is faster), not the adjusted one's
    assert doc["best"] == doc["raw_verdict"]["best"] == "a" and doc["verdict"]["best"] is None
    # one start a point cannot be tested: the raw verdict, and it says why
    doc = adjusted_verdict(sweep_rows(rng, {"a": 8.0, "b": 8.0}, 1), fixed_n, 0.05)
    assert doc["decided_by"] == "raw" and "could not be tested" in doc["why"]


def test_the_spread_by_part_names_the_part_that_carries_it():
    rng = random.Random(2)
    rows = sweep_rows(rng, {"a": 8.0, "b": 8.5}, 4, decode_sd=0.002, period_sd=0.3)
    splits = {
        r["label"]: [x["time_split"] | {"rest": {"total_s": x["time_parts"]["rest_s"]}} for x in r["runs"]]
        for r in rows
    }
    got = spread_by_part(splits)
    assert got["carried_by"] == "prefill" and got["rest"] == pytest.approx(0.0, abs=1e-9)
    assert got["prefill"] > 5 * got["decode"]


def _rounds_over(rows, until="decided"):
    """The sweep's round keeper (_Rounds) over ``rows`` already run, as after its last round."""
    from pathlib import Path

    from patchkit.profile.remote import RemoteConfig
    from patchkit.profile.remote.sweep import _Rounds

    series = Path(__file__).resolve().parents[2] / "patches" / "sglang-v0.5.9"
    cfg = RemoteConfig.from_mapping(
        dict(
            targets=["/nowhere"],
            server_command="python -m sglang.launch_server --speculative-num-steps 3",
            bench_command="bench",
            matrix="speculative-num-steps=" + ",".join(str(i + 1) for i in range(len(rows))),
            until=until,
            series=str(series),
        )
    )
    points = [{"label": r["label"]} for r in rows]
    return _Rounds(cfg, points, rows, [None], None, None, 0.0, None)


def test_a_sequential_sweep_follows_the_estimator_that_decides():
    """The rounds of --until decided follow the adjusted tok/s where the prefill period does not
    differ by point (each verdict at alpha / 2), and the raw ones where it does; the decision says
    which (the round's record keeps it)."""
    from patchkit.profile.sequential import decide_sequential

    rng = random.Random(4)
    rows = sweep_rows(rng, {"fast": 8.0 / 1.05, "slow": 8.0}, 4)
    state = _rounds_over(rows)
    got = state.decide()
    adjusted = adjusted_verdict(rows, lambda runs, alpha: {"best": None}, 0.05)
    assert state.estimator["decided_by"] == adjusted["decided_by"] == "adjusted"
    assert state.estimator["alpha"] == 0.025
    want = decide_sequential({k: v for k, v in adjusted["tokens_per_s"].items()}, alpha=0.025)
    assert (got.status, got.best, got.estimates) == (want.status, want.best, want.estimates)
    assert got.best == "fast"  # the raw tok/s, drowned in the prefill's cost, are not decided
    raw = decide_sequential({r["label"]: [x["tokens_per_s"] for x in r["runs"]] for r in rows}, alpha=0.05)
    assert raw.status == "undecided"
    # a point that changes the prefill period: the raw tok/s decide, still at alpha / 2
    rows = sweep_rows(random.Random(9), {"a": 8.0, "b": 8.0}, 5, period_sd=0.05, period_of={"b": 0.04})
    state = _rounds_over(rows)
    got = state.decide()
    assert state.estimator["decided_by"] == "raw" and "differs by point" in state.estimator["why"]
    want = decide_sequential({r["label"]: [x["tokens_per_s"] for x in r["runs"]] for r in rows}, alpha=0.025)
    assert (got.status, got.best, got.estimates) == (want.status, want.best, want.estimates)
