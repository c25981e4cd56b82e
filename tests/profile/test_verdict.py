"""patchkit.profile.verdict: intervals, Welch's t and the sweep verdict, checked against
scipy.stats and on simulated throughputs (seeded, bounded loops): identical
points are called different at most at the documented rate, 0.1% apart is indistinguishable,
30% apart is significant at the default repetitions."""

from __future__ import annotations

import math
import random
import statistics

import pytest
from scipy import stats as scipy_stats

from patchkit.profile.verdict import (
    DEFAULT_ALPHA,
    DEFAULT_REPEAT,
    betainc,
    decide_fixed,
    describe,
    interval,
    p_greater,
    phase_comparison,
    ratio_interval,
    repetition_fields,
    rotation,
    t_ppf,
    t_sf,
    welch,
)

TRIALS = 2000
# the false-positive rate may exceed alpha by sampling noise only: 3 standard errors
SLACK = 3 * math.sqrt(DEFAULT_ALPHA * (1 - DEFAULT_ALPHA) / TRIALS)


def test_the_verdicts_t_is_the_projects_one_home():
    """verdict's t routines are patchkit.report.stats's, tested against scipy.stats there
    (tests/report/test_stats.py); here the interval they build is scipy's t interval."""
    from patchkit.report import stats as home

    assert (betainc, t_ppf, t_sf) == (home.betainc, home.t_ppf, home.t_sf)
    rng = random.Random(11)
    for n in (2, 3, 5, 8, 30):
        values = [100.0 * math.exp(rng.gauss(0.0, 0.03)) for _ in range(n)]
        logs = [math.log(v) for v in values]
        lo, hi = scipy_stats.t.interval(0.95, n - 1, loc=statistics.fmean(logs), scale=scipy_stats.sem(logs))
        assert interval(values) == pytest.approx([math.exp(lo), math.exp(hi)], rel=1e-12)


@pytest.mark.parametrize("sizes", [(2, 2), (2, 3), (3, 5), (5, 5), (2, 9), (7, 4), (12, 30)])
def test_welch_is_scipys_ttest_ind_with_unequal_variances(sizes):
    """Statistic, Welch-Satterthwaite df and the one-sided p of "a is faster", on seeded log-normal
    samples of unequal sizes and spreads (n = 2 included), against
    scipy.stats.ttest_ind(equal_var=False, alternative="greater") on the logs."""
    rng = random.Random(sum(sizes) * 31 + sizes[0])
    for _ in range(20):
        a = [100.0 * math.exp(rng.gauss(0.01, rng.choice((0.005, 0.02, 0.05)))) for _ in range(sizes[0])]
        b = [100.0 * math.exp(rng.gauss(0.0, rng.choice((0.005, 0.02, 0.05)))) for _ in range(sizes[1])]
        ref = scipy_stats.ttest_ind(
            [math.log(v) for v in a], [math.log(v) for v in b], equal_var=False, alternative="greater"
        )
        got = welch(a, b)
        assert got["t"] == pytest.approx(ref.statistic, rel=1e-10)
        assert got["df"] == pytest.approx(ref.df, rel=1e-10)
        assert p_greater(a, b) == pytest.approx(ref.pvalue, rel=1e-9)
        assert p_greater(b, a) == pytest.approx(1.0 - ref.pvalue, rel=1e-9)


def test_welch_with_one_side_constant_has_the_other_sides_df():
    a, b = [1.0, 1.0, 1.0], [0.99, 1.015, 1.002, 0.987]  # log 1 = 0: a's variance is exactly 0
    ref = scipy_stats.ttest_ind(
        [math.log(v) for v in a], [math.log(v) for v in b], equal_var=False, alternative="greater"
    )
    assert welch(a, b)["df"] == pytest.approx(ref.df) == 3.0
    assert p_greater(a, b) == pytest.approx(ref.pvalue, rel=1e-9)


def test_incomplete_beta_edges_and_symmetry():
    assert betainc(2, 3, 0) == 0 and betainc(2, 3, 1) == 1
    assert betainc(1, 1, 0.3) == pytest.approx(0.3)  # uniform
    assert betainc(2.5, 1.5, 0.4) == pytest.approx(1 - betainc(1.5, 2.5, 0.6))
    assert t_sf(0.0, 3.7) == pytest.approx(0.5)


def sample(rng, rate: float, n: int, cv: float) -> list[float]:
    return [rate * math.exp(rng.gauss(0.0, cv)) for _ in range(n)]


def significant_rate(rates: list[float], n: int, cv: float, seed: int, trials: int = TRIALS):
    rng = random.Random(seed)
    hits = 0
    for _ in range(trials):  # bounded
        verdict = decide_fixed({f"p{i}": sample(rng, r, n, cv) for i, r in enumerate(rates)})
        hits += verdict["significant"]
    return hits / trials


@pytest.mark.parametrize("k", [2, 3, 5])
def test_identical_points_are_called_different_at_most_at_alpha(k):
    rate = significant_rate([1000.0] * k, DEFAULT_REPEAT, 0.03, seed=k)
    assert rate <= DEFAULT_ALPHA + SLACK


def test_identical_points_at_three_repetitions_too():
    assert significant_rate([1000.0] * 3, 3, 0.05, seed=11) <= DEFAULT_ALPHA + SLACK


def test_a_tenth_of_a_percent_apart_is_indistinguishable():
    assert significant_rate([1000.0, 1001.0], DEFAULT_REPEAT, 0.02, seed=5) <= DEFAULT_ALPHA + SLACK
    rng = random.Random(1)
    verdict = decide_fixed(
        {"a": sample(rng, 1000.0, DEFAULT_REPEAT, 0.02), "b": sample(rng, 1001.0, DEFAULT_REPEAT, 0.02)}
    )
    assert verdict["best"] is None and verdict["significant"] is False
    assert sorted(verdict["indistinguishable"]) == ["a", "b"]
    assert "no significant best" in describe(verdict)


@pytest.mark.parametrize("cv", [0.02, 0.05])
def test_thirty_percent_apart_is_significant_at_the_default_repeat(cv):
    assert significant_rate([1000.0, 1300.0, 1000.0], DEFAULT_REPEAT, cv, seed=3, trials=500) >= 0.99
    rng = random.Random(2)
    verdict = decide_fixed(
        {"slow": sample(rng, 1000.0, DEFAULT_REPEAT, cv), "fast": sample(rng, 1300.0, DEFAULT_REPEAT, cv)}
    )
    assert verdict["best"] == "fast" and verdict["significant"] is True
    assert verdict["indistinguishable"] == ["fast"] and verdict["p_values"]["slow"] < 0.025


def test_five_percent_apart_has_the_documented_power_at_the_default_repeat():
    """The module docstring's claim: 5% apart at a 2% spread is called in most sweeps."""
    assert significant_rate([1000.0, 1050.0], DEFAULT_REPEAT, 0.02, seed=7, trials=500) >= 0.8


def test_best_must_beat_every_point_not_only_the_median_one():
    # two fast twins and a slow point: the top twin does not beat its twin -> no best, and
    # the slow point is not among the indistinguishable
    rng = random.Random(4)
    verdict = decide_fixed(
        {
            "a": sample(rng, 1300.0, 5, 0.01),
            "b": sample(rng, 1300.0, 5, 0.01),
            "slow": sample(rng, 1000.0, 5, 0.01),
        }
    )
    assert verdict["best"] is None and sorted(verdict["indistinguishable"]) == ["a", "b"]


def test_small_n_and_degenerate_inputs():
    assert interval([5.0]) is None and interval([]) is None
    assert interval([5.0, 5.0, 5.0]) == pytest.approx([5.0, 5.0])
    lo, hi = interval([90.0, 100.0, 110.0])
    geo = math.exp(sum(map(math.log, [90.0, 100.0, 110.0])) / 3)
    assert lo < geo < hi and hi - lo > 20
    one = decide_fixed({"a": [100.0], "b": [120.0]})
    assert one["significant"] is False and "fewer than 2 repetitions" in one["note"]
    assert p_greater([100.0], [90.0, 91.0]) is None
    exact = decide_fixed({"a": [100.0, 100.0], "b": [90.0, 90.0]})  # no spread at all
    assert exact["best"] == "a" and exact["significant"] is True
    tie = decide_fixed({"a": [100.0, 100.0], "b": [100.0, 100.0]})
    assert tie["significant"] is False
    alone = decide_fixed({"a": [100.0, 101.0]})
    assert alone["best"] is None and alone["top"] == "a" and not alone["significant"]
    assert "nothing to compare" in describe(alone)
    assert decide_fixed({})["best"] is None
    assert ratio_interval([110.0, 112.0, 111.0], [100.0, 101.0, 99.0])[0] > 1.0
    s = repetition_fields([100.0, None, 104.0, 102.0])
    assert s["tokens_per_s_median"] == 102.0 and s["repeats"] == [100.0, None, 104.0, 102.0]
    assert s["tokens_per_s_ci"][0] < 102.0 < s["tokens_per_s_ci"][1]


def test_rotation_gives_every_point_every_position():
    order = rotation(["A", "B", "C"], 3)
    assert [label for _, label in order] == list("ABCBCACAB")
    assert [rep for rep, _ in order] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    firsts = [order[i][1] for i in range(0, 9, 3)]
    assert sorted(firsts) == ["A", "B", "C"]


# ---- the per-phase companion: every (point, phase) pair, paired by round -------------------------


def _phase_runs(rng, ms, rounds, shift=None, noise=0.005):
    """One {phase: ms} per round; ``shift[r]`` multiplies every phase of round r (both points)."""
    return [
        {
            name: value * (shift[r] if shift else 1.0) * math.exp(rng.gauss(0, noise))
            for name, value in ms.items()
        }
        for r in range(rounds)
    ]


@pytest.mark.slow  # 300 simulated sweeps, 2 s: make test runs it
def test_identical_points_have_no_phase_called_different_over_all_pairs():
    # five identical points, nine phases each: Bonferroni within a point called some phase
    # different in 15.6 % of sweeps; over every (point, phase) pair, at most alpha
    rng = random.Random(31)
    phases = {f"phase{i}": 1.0 + i for i in range(9)}
    sweeps, called = 300, 0
    for _ in range(sweeps):
        got = phase_comparison({f"p{k}": _phase_runs(rng, phases, 3) for k in range(5)}, "p0")
        assert got["pairs"] == 36
        called += any(d["differs"] for point in got["points"].values() for d in point.values())
    assert called / sweeps <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / sweeps)


def test_a_phase_is_blocked_by_round_when_rounds_move_it():
    # verify 3 % slower at b, every round shifting both points' phases alike by 5 %: the interval
    # blocked by round sees the 3 %; without the rounds the shifts drown it
    rng = random.Random(2)
    shift = [math.exp(rng.gauss(0, 0.05)) for _ in range(5)]
    a = _phase_runs(rng, {"verify": 10.0, "draft": 2.0}, 5, shift, noise=0.003)
    b = _phase_runs(rng, {"verify": 10.3, "draft": 2.0}, 5, shift, noise=0.003)
    rounds = {"a": [1, 2, 3, 4, 5], "b": [1, 2, 3, 4, 5]}
    blocked = phase_comparison({"a": a, "b": b}, "a", rounds=rounds)["points"]["b"]["verify"]
    pooled = phase_comparison({"a": a, "b": b}, "a")["points"]["b"]["verify"]
    assert blocked["test"] == "blocked by round" and blocked["differs"] and blocked["df"] == 4
    assert pooled["test"] == "pooled over points" and not pooled["differs"] and pooled["df"] == 8
    # two rounds of two points leave the blocked model 1 degree of freedom: pooled (2) is used
    short = phase_comparison({"a": a[:2], "b": b[:2]}, "a", rounds={"a": [1, 2], "b": [1, 2]})
    assert short["points"]["b"]["verify"]["test"] == "pooled over points"


def test_a_phase_3x_in_every_start_is_called_different_from_two_starts_a_point():
    # eight phases as the GPU runs measured them (device times 0.3-0.5 % apart between starts,
    # host-side ones 2-5 %); draft 3x slower at b. Welch on the phase's own two starts a side had
    # about one degree of freedom and left it undecided; with five points the phase's spread has 5
    rng = random.Random(7)
    spreads = {"draft": 0.004, "verify": 0.003, "extend": 0.005, "sample": 0.02, "host": 0.05}
    ms = {"draft": 0.35, "verify": 1.2, "extend": 0.4, "sample": 0.1, "host": 0.3}

    def starts(label, factor):
        return [
            {
                n: ms[n] * (factor if n == "draft" else 1.0) * math.exp(rng.gauss(0, sd))
                for n, sd in spreads.items()
            }
            for _ in range(2)
        ]

    for points in (2, 5):
        runs = {"a": starts("a", 1.0), "b": starts("b", 3.0)} | {
            f"c{k}": starts("c", 1.0) for k in range(points - 2)
        }
        got = phase_comparison(runs, "a")
        draft = got["points"]["b"]["draft"]
        assert draft["differs"] and draft["ratio_ci"][0] > 2.5, draft
        assert draft["df"] == points  # one degree of freedom per point of two starts
        assert not any(
            d["differs"] for label, ph in got["points"].items() for n, d in ph.items() if n != "draft"
        )


def test_the_phase_intervals_are_scipys_t_tests():
    # two points: pooled within points is Student's two-sample t; blocked by round is the paired t
    a = [{"verify": v} for v in (10.2, 10.5, 9.9, 10.4, 10.3)]
    b = [{"verify": v} for v in (10.0, 10.1, 9.8, 10.0, 10.2)]
    la, lb = ([math.log(r["verify"]) for r in runs] for runs in (a, b))
    conf = 0.95  # one (point, phase) pair: no correction
    pooled = phase_comparison({"b": b, "a": a}, "b")["points"]["a"]["verify"]
    ci = scipy_stats.ttest_ind(la, lb, equal_var=True).confidence_interval(conf)
    assert pooled["ratio_ci"] == pytest.approx([math.exp(ci.low), math.exp(ci.high)])
    rounds = {"a": [1, 2, 3, 4, 5], "b": [1, 2, 3, 4, 5]}
    blocked = phase_comparison({"b": b, "a": a}, "b", rounds=rounds)["points"]["a"]["verify"]
    ci = scipy_stats.ttest_rel(la, lb).confidence_interval(conf)
    assert blocked["ratio_ci"] == pytest.approx([math.exp(ci.low), math.exp(ci.high)])
    assert (pooled["df"], blocked["df"]) == (8, 4)
    # four rounds of two points leave 3 degrees of freedom blocked: pooled (6) is used
    four = phase_comparison({"b": b[:4], "a": a[:4]}, "b", rounds={"a": [1, 2, 3, 4], "b": [1, 2, 3, 4]})
    assert (four["points"]["a"]["verify"]["test"], four["points"]["a"]["verify"]["df"]) == (
        "pooled over points",
        6,
    )
