"""Drift (patchkit.report.drift): a change in the level of cycle time across the window, on seeded
synthetic series (its false-alarm rate over many seeds, its power on a level shift and a trend,
the comparison at the same batch size), its statistics against scipy's, and end to end on the
records the runtime writes (support.timing_files.FakeRuntime): table.txt, summary.json and
report.html say it, stalls stay stalls."""

from __future__ import annotations

import json
import math
import random

import pytest

from patchkit.report import build_report, drift as drift_mod
from patchkit.report.drift import (
    ALPHA,
    MIN_RATIO,
    permutation_pvalue,
    rank_sum_z,
    segment_levels,
    split_statistic,
)
from support.report_page import read_page
from support.requires import requires
from support.timing_files import FakeRuntime

SEEDS = 300  # per noise model: a false-alarm rate of ALPHA shows as about 3 of them


def lognormal(rng: random.Random, n: int, sigma: float) -> list[float]:
    return [math.exp(rng.gauss(0.0, sigma)) for _ in range(n)]


def heavy_tailed(rng: random.Random, n: int, stall_p: float = 0.03) -> list[float]:
    """Log time Student-t with 2 degrees of freedom (infinite variance), and isolated stalls:
    one cycle in ~33 ten times as long, anywhere."""
    out = []
    for _ in range(n):
        t = rng.gauss(0.0, 1.0) / math.sqrt(rng.gammavariate(1.0, 2.0) / 2.0)
        v = math.exp(0.2 * t)
        out.append(v * 10 if rng.random() < stall_p else v)
    return out


def shifted(values: list[float], first: int, last: int, factor: float) -> list[float]:
    return [v * factor if first <= i <= last else v for i, v in enumerate(values)]


# ---- stationary series: the false-alarm rate --------------------------------------------------


@pytest.mark.parametrize(
    "noise",
    [
        pytest.param(lambda rng, n: lognormal(rng, n, 0.05), id="lognormal-0.05"),
        pytest.param(lambda rng, n: lognormal(rng, n, 0.5), id="lognormal-0.5"),
        pytest.param(heavy_tailed, id="heavy-tailed-with-stalls"),
    ],
)
def test_stationary_noise_rarely_drifts(noise):
    """Over SEEDS stationary series of several lengths: the permutation test keeps a split in
    about ALPHA of them, whatever the noise's shape, and fewer still pass the 1.5x threshold."""
    splits = alarms = 0
    for seed in range(SEEDS):
        rng = random.Random(seed)
        found = segment_levels(noise(rng, (30, 100, 400)[seed % 3]))
        splits += len(found["levels"]) > 1
        alarms += found["detected"]
    assert splits <= 2.5 * ALPHA * SEEDS, splits  # binomial(300, 0.01): 3 expected, 7 at 1 in 300
    assert alarms <= splits
    assert alarms <= 0.02 * SEEDS, alarms


def test_a_batch_size_pattern_is_not_a_drift():
    """Cycle time set by the batch size alone, sizes in blocks that rise and fall (2x between
    the smallest and the largest): compared at the same batch size it is steady; the same
    times without their batch sizes read as levels."""
    rng = random.Random(4)
    sizes = [1 + (i // 25) % 8 for i in range(400)]
    times = [(1.0 + b / 7) * math.exp(rng.gauss(0, 0.03)) for b in sizes]
    assert not segment_levels(times, sizes)["detected"]
    assert segment_levels(times, sizes)["by_batch_size"]
    assert segment_levels(times)["detected"]


def test_a_slowdown_is_found_at_the_same_batch_size():
    """Batch sizes mixed cycle by cycle (2x between the smallest and the largest), cycles
    150-229 2.5x slower: found, at 2.5x of the same work."""
    rng = random.Random(6)
    sizes = [rng.randint(1, 8) for _ in range(400)]
    times = [(1.0 + b / 7) * math.exp(rng.gauss(0, 0.03)) for b in sizes]
    assert not segment_levels(times, sizes)["detected"]
    slow = segment_levels(shifted(times, 150, 229, 2.5), sizes)
    assert slow["detected"] and slow["by_batch_size"]
    (seg,) = slow["segments"]
    assert abs(seg["start"] - 150) <= 2 and abs(seg["end"] - 230) <= 2
    assert 2.2 < seg["ratio_to_rest"] < 2.8


# ---- drifts: a level shift, a trend ---------------------------------------------------------


@pytest.mark.parametrize("sigma", [0.05, 0.3])
def test_a_3x_level_shift_over_18_cycles_is_found(sigma):
    """Cycles 5-22 of 100 three times as long (another job on the CPU): found in every seed,
    where it is, at about 3x."""
    for seed in range(40):
        found = segment_levels(shifted(lognormal(random.Random(seed), 100, sigma), 5, 22, 3.0))
        assert found["detected"] and found["shape"] == drift_mod.SHIFT, seed
        (seg,) = found["segments"]
        # the steady cycles 0-4 may join it: a split needs 5 cycles a side and their rank
        # sums to stand out
        assert seg["start"] in range(0, 8) and seg["end"] in range(22, 27), (seed, seg)
        assert 2.4 < seg["ratio_to_rest"] < 3.6, (seed, seg)
        if sigma < 0.1:
            assert (seg["start"], seg["end"]) == (5, 23), (seed, seg)


def test_a_faster_stretch_is_a_drift_too():
    found = segment_levels(shifted(lognormal(random.Random(1), 200, 0.05), 120, 159, 0.5))
    (seg,) = found["segments"]
    assert (seg["start"], seg["end"]) == (120, 160) and 0.45 < seg["ratio_to_rest"] < 0.55


def test_a_slow_trend_is_found_and_a_mild_one_is_not():
    for seed in range(20):
        rng = random.Random(seed)
        rising = [v * (1 + 2 * i / 299) for i, v in enumerate(lognormal(rng, 300, 0.05))]
        found = segment_levels(rising)
        assert found["detected"] and found["shape"] == drift_mod.TREND, seed
        first, last = found["segments"]
        assert first["start"] == 0 and last["end"] == 300
        assert last["ratio_to_rest"] / first["ratio_to_rest"] > MIN_RATIO
        mild = [v * (1 + 0.2 * i / 299) for i, v in enumerate(lognormal(rng, 300, 0.05))]
        assert not segment_levels(mild)["detected"], seed


def test_long_runs_are_tested_in_bins():
    rng = random.Random(2)
    found = segment_levels(shifted(lognormal(rng, 6000, 0.1), 2000, 2599, 2.0))
    (seg,) = found["segments"]
    assert abs(seg["start"] - 2000) <= 3 and abs(seg["end"] - 2600) <= 3
    assert not segment_levels(lognormal(rng, 6000, 0.1))["detected"]


def test_the_finding_is_reproducible():
    values = shifted(lognormal(random.Random(9), 150, 0.4), 40, 70, 2.0)
    assert segment_levels(values) == segment_levels(list(values))


# ---- the statistics against scipy -------------------------------------------------------------


@pytest.fixture(scope="module")
def scipy_stats():
    return pytest.importorskip("scipy.stats")


def test_each_split_scores_the_mann_whitney_z(scipy_stats):
    values = lognormal(random.Random(3), 60, 0.3)
    best, at = split_statistic(values, m=5)
    zs = {}
    for k in range(5, 56):
        res = scipy_stats.mannwhitneyu(values[:k], values[k:], method="asymptotic", use_continuity=False)
        zs[k] = scipy_stats.norm.isf(res.pvalue / 2)
    assert max(zs, key=zs.get) == at
    assert best == pytest.approx(zs[at], rel=1e-9)
    # signed, as a drifted segment is held against the steady one
    res = scipy_stats.mannwhitneyu(values[:20], values[20:], method="asymptotic", use_continuity=False)
    z = rank_sum_z(values[:20], values[20:])
    assert abs(z) == pytest.approx(scipy_stats.norm.isf(res.pvalue / 2), rel=1e-9)
    assert (z > 0) == (res.statistic > 20 * 40 / 2)


@pytest.mark.parametrize("shift", [1.0, 1.25])
def test_the_permutation_p_value_is_scipys(scipy_stats, shift):
    """The same statistic through scipy.stats.permutation_test (one sample, its order permuted):
    the same p-value to within both estimates' Monte Carlo error."""
    values = shifted(lognormal(random.Random(11), 80, 0.3), 30, 60, shift)
    ours, _ = permutation_pvalue(values, permutations=1999)
    theirs = scipy_stats.permutation_test(
        (values,),
        lambda x: split_statistic(list(x))[0],
        permutation_type="pairings",
        vectorized=False,
        n_resamples=1999,
        alternative="greater",
        random_state=5,
    ).pvalue
    assert abs(ours - theirs) < 4 * math.sqrt(max(theirs, 0.01) / 1999) + 0.005, (ours, theirs)


# ---- end to end: the records the runtime writes -------------------------------------------------


def decode_run(folder, slow: dict[int, float] | None = None, cycles: int = 100, seed: int = 5):
    """A decode loop on the fake clock: draft, verify and glue, each cycle's times scaled by
    ``slow[cycle]`` (another load on the machine) where given."""
    pt = FakeRuntime(step_ns=2_000)
    rng = random.Random(seed)
    for i in range(cycles):
        f = (slow or {}).get(i, 1.0)
        pt.cycle_begin(kind="decode", batch_size=4)
        pt.begin("draft")
        pt.sleep(0.002 * f * rng.lognormvariate(0, 0.05))
        pt.end("draft")
        pt.begin("verify")
        pt.sleep(0.005 * f * rng.lognormvariate(0, 0.05))
        pt.end("verify")
        pt.sleep(0.001 * f)
        pt.cycle_end(accepted=2)
    pt.write(folder)
    return folder


def test_a_noisy_machine_is_said_in_table_and_summary(tmp_path):
    slow = {i: 3.1 for i in range(5, 23)}
    summary = build_report(decode_run(tmp_path / "timing", slow), tmp_path / "out", chart=False)
    data = json.loads((tmp_path / "out" / "summary.json").read_text())
    drift = data["drift"]
    assert drift["detected"] and drift["tested"] and drift["kind"] == "decode" and drift["rank"] == 0
    (seg,) = drift["segments"]
    assert (seg["first_cycle"], seg["last_cycle"], seg["cycles"]) == (5, 22, 18)
    assert 2.8 < seg["ratio_to_rest"] < 3.4
    assert seg["median_ms"] == pytest.approx(3.1 * seg["rest_median_ms"], rel=0.1)
    assert drift["method"] and drift["min_ratio"] == MIN_RATIO
    # no stall: 3x is under the stall rule's 4x, and the two notions stay apart
    assert data["stalls"]["decode"]["count"] == 0
    (warning,) = [w for w in data["warnings"] if w["what"] == "drift"]
    ratio = f"{seg['ratio_to_rest']:.1f}"
    assert warning["text"].startswith(
        f"warning: cycle time drifted: cycles 5\u201322 ran {ratio}\u00d7 slower than the rest "
        "(another load on the machine?); shares in this window are less certain"
    )
    table = (tmp_path / "out" / "table.txt").read_text()
    assert warning["text"] in table.splitlines()
    assert (
        f"cycle time drifted: cycles 5\u201322 ran {ratio}\u00d7 slower than the rest (rank 0, 100 " in table
    )
    assert summary.drift == drift


def test_a_steady_run_with_stalls_has_no_drift(tmp_path):
    """Isolated cycles 20x as long are stalls (left out, counted) and no drift."""
    stalls = {17: 20.0, 55: 20.0, 81: 20.0}
    build_report(decode_run(tmp_path / "timing", stalls, seed=8), tmp_path / "out", chart=False)
    data = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert data["stalls"]["decode"]["count"] == 3
    assert data["drift"]["tested"] and not data["drift"]["detected"] and data["drift"]["segments"] == []
    assert [w for w in data["warnings"] if w["what"] == "drift"] == []
    table = (tmp_path / "out" / "table.txt").read_text()
    assert "no drift in cycle time across the window (rank 0, 97 steady cycles;" in table
    assert "cycle time drifted" not in table


def test_a_slowdown_the_stall_rule_takes_is_counted_as_stalls(tmp_path):
    slow = {i: 6.0 for i in range(5, 23)}
    build_report(decode_run(tmp_path / "timing", slow), tmp_path / "out", chart=False)
    data = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert data["stalls"]["decode"]["count"] == 18 and not data["drift"]["detected"]


def test_too_few_cycles_are_not_tested(tmp_path):
    build_report(decode_run(tmp_path / "timing", cycles=12), tmp_path / "out", chart=False)
    data = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert not data["drift"]["tested"] and "fewer than 20" in data["drift"]["untested"]
    assert (
        "drift: not tested (rank 0, 12 steady cycles, fewer than 20)"
        in (tmp_path / "out/table.txt").read_text()
    )


@requires("matplotlib", reason="the report extra")
def test_the_page_warns_and_shades_the_drift(tmp_path):
    slow = {i: 3.1 for i in range(5, 23)}
    build_report(decode_run(tmp_path / "timing", slow), tmp_path / "out")
    data = json.loads((tmp_path / "out" / "summary.json").read_text())
    html = (tmp_path / "out" / "report.html").read_text()
    page = read_page(html)
    (warning,) = [w for w in data["warnings"] if w["what"] == "drift"]
    run_section = html.split('<section id="run">')[1].split("</section>")[0]
    assert warning["text"].replace("'", "&#x27;") in run_section
    assert any(t.startswith("drift: cycles 5\u201322 (18 cycles), median ") for t in page.tooltips)
    assert "Cycle time drifted: cycles 5\u201322 ran " in html
