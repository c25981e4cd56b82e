"""The sweep's decision: a horizon set by the plan, a known spread's z test at computed levels,
every look able to stop, the baseline in the race, one verdict at the level used. The seeded
sweeps run the sweep's own round loop (tests/support/sweep_sim.py: only the server start is
a draw)."""

from __future__ import annotations

import math
import random

import pytest

from patchkit.profile.remote.adjusted import choose_estimator
from patchkit.profile.remote.sweep import BASELINE, _adjusted_spread, _baseline_line, describe_sequential
from patchkit.profile.sequential import Race, plan_horizon
from patchkit.profile.spending import boundaries, crossing_probabilities, t_levels, z_design
from support.sweep_sim import named_best, run_sweep

D5 = math.log(1.05)


def test_power_by_recursive_integration_equals_scipy_multivariate_normal():
    """Two looks at t = 1/2, 1: P(first crossing at look k) under a drift, against scipy's
    bivariate normal (correlation sqrt(1/2))."""
    stats = pytest.importorskip("scipy.stats")
    times = (0.5, 1.0)
    c = boundaries(times, 0.025, "pocock")
    for drift in (0.0, 1.5, 3.0):
        got = crossing_probabilities(times, c, drift)
        m1, m2 = drift * math.sqrt(0.5), drift
        first = stats.norm.sf(c[0] - m1)
        mvn = stats.multivariate_normal([m1, m2], [[1, math.sqrt(0.5)], [math.sqrt(0.5), 1]])
        second = stats.norm.cdf(c[0] - m1) - mvn.cdf([c[0], c[1]])
        assert got[0] == pytest.approx(first, abs=1e-6) and got[1] == pytest.approx(second, abs=1e-5)
    assert sum(crossing_probabilities(times, c, 0.0)) == pytest.approx(0.025, abs=1e-6)


def test_every_look_of_the_t_test_has_a_level_above_zero():
    """A long horizon spends less than one simulated path at its first looks: the level is then
    the exact z boundary's, never 0 (a 0 made the first rounds unable to stop)."""
    levels = t_levels((2, 3, 4), 19, (1, 2, 3), 0.0125)
    assert all(0.0 < lv < 1e-3 for lv in levels)


def test_the_horizon_is_the_fewest_rounds_with_the_power_asked():
    plan = plan_horizon(0.02, 0.05, 0.05, 0.9, 2, 20, known=True)
    assert plan["horizon"] == 5 and plan["power"] >= 0.9 and not plan["capped"]
    shorter = z_design(4, D5 / (0.02 * math.sqrt(2)), 0.025, "pocock")
    assert shorter["power"] < 0.9  # so 5 is the fewest
    assert plan["expected_rounds"] < 3.0  # at most 6 starts in all on average
    assert "5 round(s)" in plan["why"] and "2.0 % between starts" in plan["why"]
    measured = plan_horizon(0.02, 0.05, 0.05, 0.9, 2, 20, known=False)
    assert measured["horizon"] > plan["horizon"]  # a t test pays for its unknown spread
    capped = plan_horizon(0.05, 0.05, 0.05, 0.9, 2, 4, known=True)
    assert capped["horizon"] == 4 and capped["capped"] and "the cap (4 rounds)" in capped["why"]
    for bad in ({"spread": 0.0}, {"power": 1.0}, {"min_effect": 0.0}):
        kw = {"spread": 0.02, "min_effect": 0.05, "power": 0.9} | bad
        with pytest.raises(ValueError):
            plan_horizon(kw["spread"], kw["min_effect"], 0.05, kw["power"])


def test_a_known_spread_is_a_z_test_that_can_stop_after_round_1():
    """With the spread known, round 1 is a look (a t test has no degree of freedom there)."""
    for sigma, decided in ((0.01, True), (None, False)):
        race = Race(["a", "b"], horizon=5, sigma=sigma)
        race.add_round({"a": 1100.0, "b": 1000.0})
        assert race.decided is decided
    d = Race(["a", "b"], horizon=5, sigma=0.01)
    d.add_round({"a": 1100.0, "b": 1000.0})
    decision = d.decision()
    assert decision.best == "a" and "z test" in decision.method and decision.level > 0


def _sweeps(n, seed, logs, spread, **kw):
    rng = random.Random(seed)
    return [run_sweep(rng, logs, spread, **kw) for _ in range(n)]


def test_five_percent_at_two_percent_is_decided_in_six_starts_on_average():
    """The spread cache holds 2 %: the horizon is 5 rounds, the sweep decides the right best in
    at least 85 % of seeded sweeps with at most 6 starts in all on average."""
    states = _sweeps(120, 11, [D5, 0.0], 0.02, known=0.02)
    right = sum(named_best(s) == "p0" for s in states) / len(states)
    starts = sum(len(s.order) for s in states) / len(states)
    assert right >= 0.85 and starts <= 6.0, (right, starts)
    assert all(s.design["horizon"] == 5 and s.design["known_spread"] == 0.02 for s in states)


@pytest.mark.parametrize("k,round_sd,known", [(2, 0.0, 0.02), (3, 0.02, 0.028), (2, 0.02, None)])
def test_identical_points_are_called_different_in_at_most_five_percent(k, round_sd, known):
    states = _sweeps(100 if known else 60, 20 + k, [0.0] * k, 0.02, round_sd=round_sd, known=known)
    named = sum(named_best(s) is not None for s in states) / len(states)
    assert named <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / len(states)), named


def test_the_stand_in_with_a_prefill_nuisance_decides_within_the_budgets_six_starts():
    """Two points 6 % apart, each start's prefill period drawn 30 % around 20 ms (the nuisance
    the adjusted estimator takes out), no spread remembered, a budget of three rounds: never
    more than 6 starts, the right best in most sweeps, never the wrong one; once the cache holds
    the spread of such sweeps, the same case decides in at most 6 starts on average."""
    first = _sweeps(30, 5, [math.log(1.06), 0.0], 0.01, prefill_sd=0.3, rounds=3)
    assert all(len(s.order) <= 6 for s in first)
    assert sum(named_best(s) == "p0" for s in first) / len(first) >= 0.5
    assert not any(named_best(s) == "p1" for s in first)
    assert all("adjusted" in (s.design.get("why") or "") or s.design["spread"] for s in first)
    # what those sweeps leave in the cache: the adjusted tok/s' spread, pooled over them
    parts = [_adjusted_spread(choose_estimator(s.rows, 0.05)) for s in first]
    parts = [p for p in parts if p]
    pooled = math.sqrt(sum(p["spread"] ** 2 * p["df"] for p in parts) / sum(p["df"] for p in parts))
    assert 0.003 < pooled < 0.02 and sum(p["df"] for p in parts) >= 8
    later = _sweeps(40, 6, [math.log(1.06), 0.0], 0.01, prefill_sd=0.3, known=0.06, known_adjusted=pooled)
    starts = sum(len(s.order) for s in later) / len(later)
    right = sum(named_best(s) == "p0" for s in later) / len(later)
    assert starts <= 6.0 and right >= 0.85, (starts, right)


def test_the_baseline_is_a_point_of_the_race():
    """--baseline in a sequential sweep: no speculation races; the verdict says the best beats
    it by how much, with an interval, or that it is the fastest."""
    beats = _sweeps(20, 8, [math.log(1.10)], 0.01, known=0.01, baseline=0.0)
    for s in beats:
        d = s.decision
        assert BASELINE in d.estimates
    won = [s for s in beats if named_best(s) == "p0"]
    assert len(won) >= 18 and all(BASELINE in s.dropped for s in won)
    from patchkit.profile.remote.sweep import _against_baseline

    against = _against_baseline(won[0].decision)
    assert against["status"] == "beats baseline" and against["point"] == "p0"
    assert against["interval"][0] > 1.0 and 1.0 < against["ratio"] < 1.25
    assert "beats it" in _baseline_line(against)
    slower = _sweeps(10, 9, [-math.log(1.10)], 0.01, known=0.01, baseline=0.0)
    assert sum(named_best(s) == BASELINE for s in slower) >= 9
    assert "fastest" in _baseline_line(_against_baseline(slower[0].decision))


def test_the_verdict_line_prints_the_level_it_used():
    verdict = {
        "sequential": True,
        "significant": True,
        "best": "p0",
        "alpha": 0.025,
        "level": 0.0061,
        "horizon": 5,
        "cost": {"rounds": 2},
    }
    line = describe_sequential(verdict)
    assert "alpha 0.025" in line and "level 0.0061" in line and "horizon of 5" in line
