"""patchkit.profile.sequential: the anytime-valid sweep verdict, racing, planning and blocks.

Simulated throughputs (rate x exp(N(0, spread))), seeded; bench/sequential_sim.py runs the same
checks at full size."""

from __future__ import annotations

import json
import math
import random

import pytest

from patchkit.profile.sequential import (
    ALPHA,
    BOUNDED,
    Race,
    _half_width,
    block_effects,
    decide_sequential,
    log_likelihood_ratio,
    plan_runs,
    race,
    round_fit,
)


def sweep(rng, logs, spread, max_rounds, design=None, pair=True):
    """Rounds of every live point until decided: (rounds, best)."""
    labels = [f"p{i}" for i in range(len(logs))]
    state = Race(labels)
    for r in range(max_rounds):
        gpus = design(r, state.live) if design else None
        values = {
            p: math.exp(
                logs[int(p[1:])]
                + (math.log(1.08) if gpus and gpus[p] == "fast" else 0.0)
                + rng.gauss(0, spread)
            )
            for p in state.live
        }
        state.add_round(values, gpus if pair else None)
        if state.decided:
            return r + 1, state.live[0]
    return max_rounds, None


@pytest.mark.parametrize("k", [2, 3])
def test_identical_points_not_called_different_under_optional_stopping(k):
    rng = random.Random(k)
    named = sum(sweep(rng, [0.0] * k, 0.02, 30)[1] is not None for _ in range(300))
    # at most alpha = 5 % (Ville); 300 sweeps: allow two binomial standard deviations of slack
    assert named / 300 <= ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / 300)


def test_the_replayed_verdict_matches_the_incremental_one():
    rng = random.Random(9)
    runs = {p: [] for p in ("a", "b", "c")}
    state = Race(list(runs))
    for _ in range(8):
        values = {p: 1000 * (1.0 + 0.04 * (p == "a")) * math.exp(rng.gauss(0, 0.02)) for p in state.live}
        for p in runs:
            if p in state.live:
                runs[p].append(values[p])
        state.add_round(values)
    replayed = race(runs)
    assert replayed.to_dict() == state.decision().to_dict()
    full = decide_sequential(runs)
    assert (full.status, full.dropped, full.intervals) == (
        replayed.status,
        replayed.dropped,
        replayed.intervals,
    )


def test_a_20_percent_difference_is_decided_within_a_few_rounds():
    rng = random.Random(20)
    for _ in range(20):
        runs: dict[str, list[float | None]] = {"fast": [], "slow": []}
        for r in range(10):  # noqa: B007 (r is read after the loop)
            runs["fast"].append(1200 * math.exp(rng.gauss(0, 0.02)))
            runs["slow"].append(1000 * math.exp(rng.gauss(0, 0.02)))
            d = decide_sequential(runs)
            if d.status == "decided":
                break
        assert d.status == "decided" and d.best == "fast"
        assert r + 1 <= 4
        assert d.contenders == ["fast"] and d.plan == {}
        assert d.intervals["fast"] == [1.0, 1.0]
        assert (
            d.intervals["slow"][1] < 1.0 < 1.25 and d.intervals["slow"][0] < 1 / 1.2 < d.intervals["slow"][1]
        )


def test_dropping_records_a_reason_and_the_rest_go_on():
    rng = random.Random(3)
    runs: dict[str, list[float | None]] = {"a": [], "b": [], "loser": []}
    d = None
    for _round in range(6):
        for label, rate in (("a", 1000), ("b", 1010), ("loser", 700)):
            if d is None or label in d.contenders:
                runs[label].append(rate * math.exp(rng.gauss(0, 0.02)))
        d = decide_sequential(runs, difference=0.05)
    assert d is not None
    assert "loser" in d.dropped and "loser" not in d.contenders
    reason = d.dropped["loser"]
    # the level the interval was at: alpha / (K - 1) with three points, not the sweep's 95 %
    assert reason.startswith("worse than ") and "anytime-valid" in reason and "at 97.5 %" in reason
    assert d.dropped_round["loser"] == len(runs["loser"])
    assert d.status == "undecided" and d.best is None and set(d.contenders) == {"a", "b"}
    # the plan: every undecided contender gets its further runs, at the spread measured so far
    assert set(d.plan) == {"a", "b"}
    for entry in d.plan.values():
        assert entry["for_difference"] == 0.05 and 0.01 < entry["spread"] < 0.04
        assert entry["more_runs"] is None or entry["more_runs"] >= 1


def test_failed_runs_are_ignored():
    rng = random.Random(4)
    a = [1000 * math.exp(rng.gauss(0, 0.02)) for _ in range(6)]
    b = [1000 * math.exp(rng.gauss(0, 0.02)) for _ in range(6)]
    with_failures = decide_sequential({"a": [*a[:3], None, *a[3:]], "b": [*b[:3], None, *b[3:]]})
    without = decide_sequential({"a": a, "b": b})
    assert with_failures.estimates == pytest.approx(without.estimates)
    for label, interval in without.intervals.items():
        assert with_failures.intervals[label] == pytest.approx(interval)
    # a point that never ran successfully: no estimate, an unbounded interval, nothing decided
    d = decide_sequential({"a": a, "b": b, "dead": [None] * 6})
    assert "dead" not in d.estimates and d.intervals["dead"] == [0.0, math.inf]
    assert d.status == "undecided" and "dead" in d.contenders


def test_to_dict_is_json():
    d = decide_sequential({"a": [1000.0, None], "b": [990.0, 1001.0]}, prior_spread=0.02)
    doc = json.loads(json.dumps(d.to_dict(), allow_nan=False))
    assert doc["status"] == "undecided" and doc["intervals"]["b"][1] is None
    assert set(doc) >= {"status", "best", "contenders", "dropped", "intervals", "estimates", "plan", "method"}


def test_prior_spread_plans_but_never_decides():
    runs: dict[str, list[float | None]] = {"a": [1000.0], "b": [900.0]}
    blind = decide_sequential(runs)
    primed = decide_sequential(runs, prior_spread=0.02)
    assert blind.plan["b"]["more_runs"] is None  # one degree of freedom: one run each: no spread to plan from
    assert primed.plan["b"]["spread"] == 0.02 and primed.plan["b"]["more_runs"] >= 1
    assert (primed.status, primed.intervals, primed.dropped) == (blind.status, blind.intervals, blind.dropped)
    # once measured, the sweep's own spread replaces the remembered one
    runs = {"a": [1000.0, 1010.0, 995.0], "b": [990.0, 1012.0, 1001.0]}
    assert decide_sequential(runs, prior_spread=0.5).plan["b"]["spread"] != 0.5


def test_one_point_or_none_decides_nothing_and_shapes_are_checked():
    assert decide_sequential({"a": [1.0, 2.0, 3.0]}).status == "undecided"
    assert decide_sequential({}).status == "undecided"
    with pytest.raises(ValueError, match="2 runs but 1 blocks"):
        decide_sequential({"a": [1.0, 2.0], "b": [1.0, 2.0]}, {"a": ["g0"], "b": ["g0", "g1"]})


# ---- blocks -------------------------------------------------------------------------------------


def test_a_point_run_only_on_the_fast_gpu_is_not_favoured():
    rng = random.Random(5)
    runs = {"a": [1080 * math.exp(rng.gauss(0, 0.02)) for _ in range(12)]}
    runs["b"] = [1000 * math.exp(rng.gauss(0, 0.02)) for _ in range(12)]
    blocks = {"a": ["fast"] * 12, "b": ["slow"] * 12}
    assert decide_sequential(runs).best == "a"  # unpaired, the GPU's 8 % looks like the point's
    paired = decide_sequential(runs, blocks)
    assert paired.status == "undecided" and paired.dropped == {}
    assert paired.intervals["b"] == [0.0, math.inf] or paired.intervals["a"] == [0.0, math.inf]


def test_blocks_remove_a_block_offset():
    # identical points, GPU "fast" 8 % faster; "a" ran there in 3 of every 4 rounds
    rng = random.Random(6)
    runs: dict[str, list[float | None]] = {"a": [], "b": []}
    blocks: dict[str, list[str | None]] = {"a": [], "b": []}
    for r in range(16):
        a_fast = r % 4 != 0
        for label, fast in (("a", a_fast), ("b", not a_fast)):
            runs[label].append(1000 * (1.08 if fast else 1.0) * math.exp(rng.gauss(0, 0.01)))
            blocks[label].append("fast" if fast else "slow")
    effects = block_effects(runs, blocks)
    assert effects["fast"] - effects["slow"] == pytest.approx(math.log(1.08), abs=0.01)
    assert sum(effects.values()) == pytest.approx(0.0, abs=1e-9)
    d = decide_sequential(runs, blocks)
    assert d.status == "undecided"
    assert d.estimates["a"] / d.estimates["b"] == pytest.approx(1.0, abs=0.02)
    lo, hi = d.intervals["b"] if d.leader == "a" else d.intervals["a"]
    assert lo < 1.0 < hi
    assert block_effects(runs, None) == {}


def test_randomized_blocks_keep_identical_points_undecided():
    rng = random.Random(7)

    def rotation(r, live):
        order = list(live)
        rng.shuffle(order)
        return {p: ("fast", "slow")[i % 2] for i, p in enumerate(order)}

    named = sum(sweep(rng, [0.0, 0.0], 0.02, 20, rotation)[1] is not None for _ in range(150))
    assert named / 150 <= ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / 150)


# ---- planning -----------------------------------------------------------------------------------


def test_plan_runs_is_monotone_in_spread_and_difference():
    by_spread = [plan_runs(s, 0.05) for s in (0.005, 0.01, 0.02, 0.03, 0.04)]
    assert all(isinstance(n, int) for n in by_spread)
    assert by_spread == sorted(by_spread) and by_spread[0] < by_spread[-1]
    by_difference = [plan_runs(0.03, d) for d in (0.03, 0.05, 0.1, 0.2, 0.4)]
    assert by_difference == sorted(by_difference, reverse=True) and by_difference[0] > by_difference[-1]
    assert plan_runs(0.02, 0.05, points=5) >= plan_runs(0.02, 0.05)  # a smaller alpha per comparison
    assert plan_runs(0.02, 0.05, power=0.95) >= plan_runs(0.02, 0.05, power=0.5)
    assert plan_runs(0.2, 0.001) is None  # beyond MAX_RUNS
    assert plan_runs(0.0, 0.05) == 3  # no spread: the earliest round the sequence can be bounded


def test_plan_runs_matches_a_simulated_sweep():
    spread, diff = 0.02, 0.05
    n = plan_runs(spread, diff)
    assert n is not None and 5 <= n <= 12
    rng = random.Random(11)
    logs = [math.log1p(diff), 0.0]
    power = sum(sweep(rng, logs, spread, n)[1] == "p0" for _ in range(400)) / 400
    assert 0.72 <= power <= 0.92
    rng = random.Random(12)
    assert sum(sweep(rng, logs, spread, n - 2)[1] == "p0" for _ in range(400)) / 400 < power


# ---- the confidence sequence against scipy ------------------------------------------------------


@pytest.fixture
def scipy():
    """scipy is not a dependency: the cross-checks run where it is installed."""
    return pytest.importorskip("scipy")


@pytest.mark.parametrize("df", [1, 2, 3, 4, 10, 30, 100, 1000])
def test_a_looks_t_quantile_is_finite_and_scipys_down_to_tiny_levels(df):
    """The bounded test's early looks spend levels of 1e-13 and below: the repeated interval's
    quantile there is the t quantile itself (not infinity); only a look that spends nothing
    has none."""
    from scipy import stats

    from patchkit.profile.sequential import _t_quantile

    for level in (0.025, 1e-3, 1e-6, 1e-11, 1e-12, 1e-13, 1e-14, 1e-15, 1e-40):
        assert _t_quantile(level, df) == pytest.approx(stats.t.isf(level, df), rel=1e-9), level
    assert _t_quantile(0.0, df) == math.inf


@pytest.mark.parametrize(("n", "m"), [(1.5, 5), (4.0, 15), (0.75, 3), (10.0, 39)])
def test_the_mixture_is_a_likelihood_ratio_with_mean_one(scipy, n, m):
    from scipy import integrate, stats

    # Under theta = theta0, t = D sqrt(n) / sqrt(S / (m - 1)) is Student t with m - 1 df and the
    # LR depends on the data only through t: its expectation must be exactly 1 (a martingale's).
    def lr(t):
        ss = 1.0
        d = t * math.sqrt(ss / (m - 1) / n)
        return math.exp(log_likelihood_ratio(n, m, ss, d))

    mean, _err = integrate.quad(lambda t: lr(t) * stats.t.pdf(t, m - 1), -math.inf, math.inf, limit=200)
    assert mean == pytest.approx(1.0, rel=1e-6)


def test_the_closed_form_likelihood_ratio_is_the_invariant_mixture(scipy):
    from scipy import integrate, stats

    # the scale-invariant likelihood ratio by direct integration: N(0, 1/rho) over the
    # standardised effect, the right-Haar measure over sigma; five observations, mean 0 under H0
    ys = [0.3, -0.1, 0.5, 0.2, 0.4]
    rho = 0.1

    def density(delta, sigma):  # the data's density, times the right-Haar 1/sigma
        return math.exp(sum(-0.5 * ((y - delta * sigma) / sigma) ** 2 for y in ys)) / sigma ** (len(ys) + 1)

    def over_sigma(delta):
        return integrate.quad(lambda sigma: density(delta, sigma), 0.02, 5.0, epsrel=1e-8)[0]

    prior = stats.norm(0.0, 1.0 / math.sqrt(rho))
    num = integrate.quad(lambda delta: over_sigma(delta) * prior.pdf(delta), -20, 20, epsrel=1e-8)[0]
    den = over_sigma(0.0)
    n, mean = len(ys), sum(ys) / len(ys)
    ss = sum((y - mean) ** 2 for y in ys)
    # one sample of n with theta0 = 0: n_eff = n, m = n (no block parameter: the null fixes the mean)
    assert math.exp(log_likelihood_ratio(n, n, ss, mean, rho)) == pytest.approx(num / den, rel=1e-4)


@pytest.mark.parametrize(("n", "m", "alpha"), [(1.5, 5, 0.05), (4.0, 15, 0.0125), (20.0, 79, 0.05)])
def test_the_half_width_solves_lr_equal_to_one_over_alpha(scipy, n, m, alpha):
    from scipy import optimize, stats

    ss = 0.01
    h = _half_width(n, m, ss, alpha)
    root = optimize.brentq(lambda d: log_likelihood_ratio(n, m, ss, d) - math.log(1 / alpha), 1e-9, 10.0)
    assert h == pytest.approx(root, rel=1e-9)
    # and at a fixed n the sequence is wider than the fixed-n t interval (the price of peeking)
    t_half = stats.t.ppf(1 - alpha / 2, m - 1) * math.sqrt(ss / (m - 1) / n)
    assert h > t_half


# ---- the bounded sweep: a horizon of rounds, alpha spent over it, rounds as blocks ---------------


def bounded_sweep(rng, logs, spread, horizon, round_sd=0.0, anytime=False):
    """Rounds of every live point up to ``horizon``, each round shifting every run by a common
    N(0, round_sd): (rounds, best)."""
    labels = [f"p{i}" for i in range(len(logs))]
    state = Race(labels, horizon=None if anytime else horizon)
    for r in range(horizon):
        shift = rng.gauss(0, round_sd)
        values = {p: math.exp(logs[int(p[1:])] + shift + rng.gauss(0, spread)) for p in state.live}
        state.add_round(values, final=r == horizon - 1)
        if state.decided:
            return r + 1, state.live[0]
    return horizon, None


# k = 3 and 5 take 3-6 s each (simulated sweeps): make test runs them, make test-fast k = 2
@pytest.mark.parametrize(
    "k", [2, pytest.param(3, marks=pytest.mark.slow), pytest.param(5, marks=pytest.mark.slow)]
)
def test_identical_points_are_not_named_best_by_the_bounded_test(k):
    rng = random.Random(40 + k)
    sweeps = 300
    named = sum(bounded_sweep(rng, [0.0] * k, 0.02, 8, round_sd=0.02)[1] is not None for _ in range(sweeps))
    assert named / sweeps <= ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / sweeps)


def test_rounds_are_blocks_a_round_effect_costs_the_bounded_test_nothing():
    # 5 % apart at 2 % spread, every round shifted by a common 4 %: the bounded test pairs
    # within rounds; the anytime test (no round blocks) loses most of its power to the shift
    logs = [math.log(1.05), 0.0]
    power = {}
    for name, anytime, round_sd in (("calm", False, 0.0), ("rounds", False, 0.04), ("anytime", True, 0.04)):
        rng = random.Random(7)
        power[name] = (
            sum(bounded_sweep(rng, logs, 0.02, 8, round_sd, anytime)[1] == "p0" for _ in range(300)) / 300
        )
    assert power["rounds"] >= power["calm"] - 0.08
    assert power["rounds"] > power["anytime"] + 0.2


def test_a_clear_difference_is_decided_at_round_two_only_by_the_bounded_test():
    runs = {"fast": [1300.0, 1310.0], "slow": [1000.0, 1004.0]}
    bounded = race(runs, horizon=2)
    assert bounded.status == "decided" and bounded.best == "fast" and bounded.design == BOUNDED
    assert race(runs).status == "undecided"  # the anytime-valid sequence needs a third round


def test_the_last_look_spends_what_is_left():
    runs = {"a": [1000.0, 1040.0, 1000.0], "b": [990.0, 1000.0, 975.0]}
    mid = race(runs, horizon=10)
    last = race(runs, horizon=10, final_round=3)
    assert mid.level is not None and last.level is not None
    assert last.level > 20 * mid.level  # the budget ends the sweep: the rest of alpha goes here
    assert last.level <= ALPHA / 2  # and never more than a side's share of the level


def test_a_drop_says_the_level_used_and_an_early_stop_is_marked():
    rng = random.Random(5)
    runs: dict[str, list[float | None]] = {"a": [], "b": [], "c": []}
    d = None
    for _ in range(6):
        for label, rate in (("a", 1200), ("b", 1000), ("c", 990)):
            if d is None or label in d.contenders:
                runs[label].append(rate * math.exp(rng.gauss(0, 0.02)))
        d = decide_sequential(runs, horizon=6)
        if d.status == "decided":
            break
    assert d is not None and d.status == "decided" and d.best == "a"
    assert d.rounds < 6 and d.early_stop and "biased upward" in (d.estimates_note or "")
    for reason in d.dropped.values():
        assert "nominal level" in reason and "of 6" in reason and "obf spending of 0.0125 a side" in reason
    assert json.loads(json.dumps(d.to_dict()))["horizon"] == 6
    # a sweep that ran to its horizon is not an early stop
    full = race({"a": [1000.0] * 3, "b": [1001.0, 999.0, 1000.5]}, horizon=3)
    assert not full.early_stop and full.estimates_note is None


def test_the_round_fit_is_least_squares_with_round_and_block_factors(scipy):
    np = pytest.importorskip("numpy")
    rng = random.Random(8)
    obs = []
    for r in range(5):
        for i, p in enumerate(("a", "b", "c")):
            if r == 4 and p == "c":
                continue  # dropped: the design is unbalanced
            block = ("g0", "g1", "g2")[(i + r) % 3]
            obs.append((p, r, block, 0.1 * i + 0.05 * r + 0.02 * (block == "g1") + rng.gauss(0, 0.02)))
    fit = round_fit(obs)
    assert fit is not None
    points, rounds, blocks = ["a", "b", "c"], sorted({o[1] for o in obs}), ["g0", "g1", "g2"]
    x = np.array(
        [
            [float(p == q) for q in points]
            + [float(r == s) for s in rounds[1:]]
            + [float(b == c) for c in blocks[1:]]
            for p, r, b, _y in obs
        ]
    )
    y = np.array([o[3] for o in obs])
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    resid = y - x @ beta
    assert fit.df == len(obs) - x.shape[1]
    assert fit.ss == pytest.approx(float(resid @ resid), rel=1e-9)
    cov = np.linalg.inv(x.T @ x)
    est, var = fit.contrast("c", "a")
    assert est == pytest.approx(beta[2] - beta[0], abs=1e-12)
    assert var == pytest.approx(cov[2, 2] + cov[0, 0] - 2 * cov[0, 2], rel=1e-9)
