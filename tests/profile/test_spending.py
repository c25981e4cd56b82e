"""patchkit.profile.spending: group-sequential boundaries against scipy and the published values."""

from __future__ import annotations

import itertools
import math

import pytest

from patchkit.profile.spending import boundaries, look_times, nominal_levels, spent, t_levels


@pytest.fixture
def scipy():
    return pytest.importorskip("scipy")


def test_the_obrien_fleming_type_boundaries_are_the_published_ones():
    # Lan & DeMets O'Brien-Fleming-type spending, five equally spaced looks, one-sided 0.025
    # (the example of R's ldbounds and gsDesign documentation)
    got = boundaries(tuple(k / 5 for k in range(1, 6)), 0.025, "obf")
    assert [round(c, 3) for c in got] == [4.877, 3.357, 2.680, 2.290, 2.031]


@pytest.mark.slow  # 1-3 s each under scipy's multivariate normal: make test runs them
@pytest.mark.parametrize("spending", ["obf", "pocock"])
@pytest.mark.parametrize("times", [(0.2, 0.4, 0.6, 0.8, 1.0), (0.25, 0.5, 1.0), (2 / 7, 3 / 7, 4 / 7, 5 / 7)])
def test_each_look_spends_what_the_function_allows_under_scipys_multivariate_normal(scipy, spending, times):
    from scipy import stats

    alpha = 0.025
    cs = boundaries(times, alpha, spending)
    for k in range(1, len(times) + 1):
        ts = times[:k]
        cov = [[math.sqrt(min(a, b) / max(a, b)) for b in ts] for a in ts]
        upper = [min(c, 40.0) for c in cs[:k]]
        stay = stats.multivariate_normal.cdf(upper, mean=[0.0] * k, cov=cov, abseps=1e-7, releps=1e-7)
        assert 1.0 - stay == pytest.approx(spent(ts[-1], alpha, spending), abs=3e-5)


def test_a_final_look_before_the_horizon_spends_the_rest(scipy):
    from scipy import stats

    times = (0.25, 0.5)
    cs = boundaries(times, 0.05, "obf", final=True)
    cov = [[1.0, math.sqrt(0.5)], [math.sqrt(0.5), 1.0]]
    stay = stats.multivariate_normal.cdf(list(cs), mean=[0.0, 0.0], cov=cov, abseps=1e-7, releps=1e-7)
    assert 1.0 - stay == pytest.approx(0.05, abs=3e-5)
    # and it is a lower bar than the same look when more were to come
    assert cs[-1] < boundaries(times, 0.05, "obf")[-1]


def test_a_boundary_is_never_below_the_fixed_sample_one_and_pocock_spends_earlier():
    times = look_times(10, 10)
    obf, pocock = boundaries(times, 0.025, "obf"), boundaries(times, 0.025, "pocock")
    z = 1.959963984540054
    assert all(c > z for c in obf) and all(c > z for c in pocock)
    assert obf[0] > pocock[0] and obf[-1] < pocock[-1]
    assert all(a >= b for a, b in itertools.pairwise(obf))  # O'Brien-Fleming: falling
    levels = nominal_levels(times, 0.025, "obf")
    assert sum(levels) > 0.025 > max(levels)  # repeated looks: each below, together above


def test_look_times_start_at_round_two_and_stop_at_the_horizon():
    assert look_times(1, 6) == ()
    assert look_times(4, 6) == (2 / 6, 3 / 6, 4 / 6)
    assert look_times(9, 6)[-1] == 1.0
    with pytest.raises(ValueError):
        boundaries((0.5, 0.5), 0.05)
    with pytest.raises(ValueError):
        spent(0.5, 0.05, "haybittle")


def test_a_single_look_is_the_t_test_itself():
    # one look with every level spent: the calibrated level is the t test's (up to its paths)
    (level,) = t_levels((3,), 3, (2,), 0.025, final=True)
    assert level == pytest.approx(0.025, rel=0.08)


@pytest.mark.slow  # simulated paths, 2 s: make test runs it
def test_calibrated_t_levels_keep_the_two_sided_error_on_paired_data():
    # identical points, paired by round, a look after every round from 2 to 6: the rate of
    # crossing on either side stays at 2 x 0.025 (the plain significance-level approach,
    # z levels on t statistics, goes over it; bench/bounded_sim.py)
    import random
    import statistics

    from patchkit.profile.verdict import t_sf

    horizon = 6
    rounds = tuple(range(2, horizon + 1))
    levels = t_levels(rounds, horizon, tuple(r - 1 for r in rounds), 0.025)
    plain = nominal_levels(tuple(r / horizon for r in rounds), 0.025)
    rng = random.Random(3)

    def rate(lv):
        hits = 0
        for _ in range(3000):
            d: list[float] = []
            for k in range(1, horizon + 1):
                d.append(rng.gauss(0.0, 1.0))
                if k >= 2:
                    t = abs(statistics.fmean(d)) / (statistics.stdev(d) / math.sqrt(k))
                    if t_sf(t, k - 1) < lv[k - 2]:
                        hits += 1
                        break
        return hits / 3000

    assert rate(levels) <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / 3000)
    assert rate(plain) > rate(levels)
