"""patchkit.report.stats, the project's one home of the t and F distributions and of the
percentile, against scipy.stats and numpy (both installed with the test extra): every df of
a sweep's verdict (1..100 and 1000, fractional Welch dfs), both tails down to 1e-15."""

from __future__ import annotations

import math
import random
import statistics

import numpy
import pytest
from scipy import stats

from patchkit.report.stats import (
    betainc,
    f_cdf,
    f_ppf,
    f_sf,
    percentile,
    percentile_sorted,
    t_cdf,
    t_isf,
    t_ppf,
    t_sf,
)

T_DFS = [*range(1, 101), 1000, 0.7, 2.5, 7.31]  # every whole df a sweep reaches, and Welch's fractional ones
LEVELS = [0.4, 0.25, 0.1, 0.05, 0.025, 1e-2, 1e-3, 1e-4, 1e-6, 1e-9, 1e-12, 1e-13, 1e-14, 1e-15]
T_VALUES = [0.01, 0.3, 1.0, 1.96, 2.5, 4.0, 10.0, 50.0, 1e3, 1e6, 1e10]
F_DFS = [1, 2, 3, 5, 30, 1000, 0.5]
F_VALUES = [1e-12, 1e-6, 1e-3, 0.1, 0.5, 1.0, 2.0, 5.0, 20.0, 100.0, 1e4, 1e8, 1e30]
REL = 1e-9  # relative: the continued fraction converges to 1e-15, lgamma of large dfs costs the rest


@pytest.mark.parametrize("df", T_DFS)
def test_t_tails_are_scipys_at_every_df(df):
    for t in T_VALUES:
        for value in (t, -t):
            sf, cdf = stats.t.sf(value, df), stats.t.cdf(value, df)
            assert t_sf(value, df) == pytest.approx(sf, rel=REL, abs=1e-300), (df, value)
            assert t_cdf(value, df) == pytest.approx(cdf, rel=REL, abs=1e-300), (df, value)
    assert t_sf(0.0, df) == 0.5 and t_sf(math.inf, df) == 0.0 and t_cdf(math.inf, df) == 1.0


@pytest.mark.parametrize("df", T_DFS)
def test_t_quantiles_are_scipys_down_to_1e_15(df):
    """Both tails, as the sweep asks them: a one-sided level q is t_isf(q) = t_ppf(1 - q) =
    -t_ppf(q); each keeps q's digits (1 - 1e-15 does not: t_isf is the way in from a level)."""
    for q in LEVELS:
        upper = stats.t.isf(q, df)
        assert t_isf(q, df) == pytest.approx(upper, rel=REL), (df, q)
        assert t_ppf(q, df) == pytest.approx(-upper, rel=REL), (df, q)
        assert t_isf(1.0 - q, df) == pytest.approx(stats.t.isf(1.0 - q, df), rel=REL), (df, q)
        if q >= 1e-10:  # below that, 1 - q in the argument has lost q's digits, scipy's too
            assert t_ppf(1.0 - q, df) == pytest.approx(stats.t.ppf(1.0 - q, df), rel=REL), (df, q)
        assert t_sf(t_isf(q, df), df) == pytest.approx(q, rel=1e-10)


def test_t_quantiles_stay_finite_far_below_any_table():
    """A boundary's early look may spend 1e-100 or less: the quantile is finite and right."""
    for df in (1, 2, 5, 30):
        for q in (1e-30, 1e-100, 1e-150):
            assert t_isf(q, df) == pytest.approx(stats.t.isf(q, df), rel=REL), (df, q)
    with pytest.raises(ValueError):
        t_isf(0.0, 3)
    with pytest.raises(ValueError):
        t_ppf(1.0, 3)


@pytest.mark.parametrize("d1", F_DFS)
@pytest.mark.parametrize("d2", F_DFS)
def test_f_sf_cdf_and_ppf_are_scipys(d1, d2):
    for f in F_VALUES:
        sf, cdf = stats.f.sf(f, d1, d2), stats.f.cdf(f, d1, d2)
        assert f_sf(f, d1, d2) == pytest.approx(sf, rel=REL, abs=1e-300), (d1, d2, f)
        assert f_cdf(f, d1, d2) == pytest.approx(cdf, rel=REL, abs=1e-300), (d1, d2, f)
    for p in (1e-15, 1e-12, 1e-6, 0.01, 0.05, 0.5, 0.9, 0.95, 0.99, 1 - 1e-6, 1 - 1e-12):
        assert f_ppf(p, d1, d2) == pytest.approx(stats.f.ppf(p, d1, d2), rel=REL), (d1, d2, p)
    assert f_sf(0.0, d1, d2) == 1.0 and f_cdf(0.0, d1, d2) == 0.0 and f_sf(math.inf, d1, d2) == 0.0


def test_the_incomplete_beta_is_scipys_with_its_complement_given():
    from scipy import special

    for a, b in ((0.5, 0.5), (1, 1), (2.5, 1.5), (0.5, 500), (500, 0.5), (15, 40)):
        for x in (1e-12, 1e-3, 0.2, 0.5, 0.8, 0.999):
            assert betainc(a, b, x) == pytest.approx(special.betainc(a, b, x), rel=REL, abs=1e-300)
    # x within 1e-18 of 1: 1 - x in floating point is 0, the caller's complement is not
    assert betainc(0.5, 0.5, 1.0, 1e-18) == pytest.approx(1.0 - 2e-9 / math.pi, rel=1e-15)
    assert betainc(0.5, 0.5, 1.0) == 1.0


def test_percentile_is_numpys_linear_definition():
    rng = random.Random(5)
    for n in (1, 2, 3, 7, 20, 101, 400):
        values = [rng.lognormvariate(0.0, 0.5) for _ in range(n)]
        for q in (0.0, 2.5, 25.0, 50.0, 97.5, 99.0, 100.0):
            ref = float(numpy.percentile(values, q))
            assert percentile(values, q) == pytest.approx(ref, rel=1e-12)
            assert percentile_sorted(sorted(values), q) == pytest.approx(ref, rel=1e-12)
        if n >= 2:  # the same as the standard library's inclusive quantiles
            assert percentile(values, 25.0) == pytest.approx(
                statistics.quantiles(values, method="inclusive")[0]
            )
    assert percentile([], 50.0) is None
