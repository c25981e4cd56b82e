"""profile.sweep on the embedded default at the "ci" size: two points plus the baseline."""

from __future__ import annotations

import io
import itertools
import json
from pathlib import Path

import pytest

from patchkit import ops
from patchkit.errors import InvalidInput
from patchkit.profile import ensure_site, parse_matrix, run_sweep
from patchkit.profile.local_sweep import expand, render
from patchkit.profile.site import DEFAULT_SERIES
from support.cli import invoke
from support.requires import requires
from support.upstream import default_wheelhouse

# torch and transformers' dependencies (the profile extra), asked without importing them
pytestmark = requires("torch", "huggingface_hub", reason="the profile extra")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("sweep") / "tf-site"
    return ensure_site(DEFAULT_SERIES, dest, wheelhouse=default_wheelhouse(), log=lambda m: None)


def test_parse_matrix_and_expand():
    m = parse_matrix("num_assistant_tokens=2,8; conf=0,0.5")
    assert m == {"num_assistant_tokens": [2, 8], "assistant_confidence_threshold": [0.0, 0.5]}
    points = expand(m)
    assert [p["label"] for p in points] == ["k=2 conf=0", "k=2 conf=0.5", "k=8 conf=0", "k=8 conf=0.5"]
    assert all(p["schedule"] == "constant" for p in points)
    assert expand(parse_matrix("schedule=heuristic"))[0]["num_assistant_tokens"] == 4


@pytest.mark.parametrize(
    "text", ["", "k=", "k=0", "topk=2", "conf=1.5", "k=two", "schedule=sometimes", "num_assistant_tokens"]
)
def test_bad_matrix_is_invalid_input(text):
    with pytest.raises(InvalidInput):
        parse_matrix(text)


@pytest.mark.parametrize("repeat", [0, "x", -2])
def test_bad_repeat_is_invalid_input_before_anything_runs(tmp_path, repeat):
    with pytest.raises(InvalidInput, match="--repeat"):
        run_sweep(tmp_path / "out", size="ci", repeat=repeat, site=tmp_path / "no-site")
    assert not (tmp_path / "out").exists() and not (tmp_path / "no-site").exists()


def test_render_marks_the_best_row():
    rows = [
        {
            "label": "k=2",
            "tokens_per_s": 10.0,
            "ratio": 1.1,
            "accept_length": 2.5,
            "verify_share": 60.0,
            "draft_share": 30.0,
            "cycle_ms": 5.0,
            "basis": "device",
            "identical_outputs": "2/2",
        },
        {
            "label": "k=4",
            "tokens_per_s": 12.0,
            "ratio": 1.3,
            "accept_length": 3.5,
            "verify_share": 55.0,
            "draft_share": 40.0,
            "cycle_ms": 6.0,
            "basis": "device",
            "identical_outputs": "2/2",
        },
    ]
    text = render(rows, {"tokens_per_s": 9.0}, rows[1], "head")
    marked = [ln for ln in text.splitlines() if ln.startswith("* ")]
    assert len(marked) == 1 and "k=4" in marked[0] and "1.30x" in marked[0]
    assert "best: k=4" in text and "device time" in text
    md = render(rows, {"tokens_per_s": 9.0}, rows[1], "head", markdown=True)
    assert "| **k=4** | **12.0** | **-** | **1.30x**" in md and "| k=2 | 10.0 | - | 1.10x" in md
    # with a verdict that is not significant, nothing is marked and the table says why
    verdict = {
        "best": None,
        "significant": False,
        "top": "k=4",
        "alpha": 0.05,
        "note": None,
        "indistinguishable": ["k=4", "k=2"],
        "p_values": {"k=2": 0.2},
        "cost": {"runs": 6, "repeat": 3, "minutes": 0.5},
    }
    rows[1].update(tokens_per_s_ci=[11.0, 13.0], ratio_ci=[1.2, 1.4], repeats=[11.0, 12.0, 13.0])
    text = render(rows, {"tokens_per_s": 9.0}, rows[1], "head", verdict=verdict)
    assert not [ln for ln in text.splitlines() if ln.startswith("* ")]
    assert "top (not a verdict): k=4" in text and "[1.20, 1.40]" in text
    assert "indistinguishable from the top: k=4, k=2" in text
    assert "verdict cost: 6 measured pass(es)" in text


@pytest.mark.slow  # a real transformers workload: two points and a baseline (15 s here)
def test_sweep_two_points_end_to_end(site, tmp_path):
    out = io.StringIO()
    outcome = run_sweep(
        tmp_path,
        size="ci",
        matrix={"num_assistant_tokens": [1, 4]},
        site=site,
        stream=out,
        chart=False,
        timeout=300,
        repeat=1,
        warmup=False,
    )
    status = ops.status(str(DEFAULT_SERIES), [str(site)], ops.Options(layout="installed"))
    assert status.hosts[0].state == "pristine"

    doc = json.loads((outcome.run_dir / "sweep.json").read_text())
    assert doc["schema"] == "patchkit.sweep/1" and [r["label"] for r in doc["rows"]] == ["k=1", "k=4"]
    assert doc["baseline"]["tokens_per_s"] > 0
    work = outcome.workload
    for row, _point in zip(doc["rows"], work["points"]):
        k = row["params"]["num_assistant_tokens"]
        assert 1.0 <= row["accept_length"] <= k + 1
        assert row["ratio"] == pytest.approx(row["tokens_per_s"] / row["baseline_tokens_per_s"])
        assert row["repeats"] == [row["tokens_per_s"]] and row["tokens_per_s_ci"] is None
        assert 0 < row["verify_share"] < 100 and 0 < row["draft_share"] < 100
        assert row["verify_share"] + row["draft_share"] < 100.5
        report = json.loads((outcome.run_dir / row["report"] / "summary.json").read_text())
        assert report["meta"]["tokens_per_s"] == row["tokens_per_s"]
        drafted = [c for c in report["phases"] if c["name"] == "draft_generate"]
        assert drafted and drafted[0]["count"] > 0
    # k=1 drafts one token per cycle: accepted length is at most 2, and it needs more cycles
    k1, k4 = doc["rows"]
    assert k1["accept_length"] <= 2.0 < k4["accept_length"]
    assert work["points"][0]["assisted"]["target_forwards"] > work["points"][1]["assisted"]["target_forwards"]
    best = max(doc["rows"], key=lambda r: r["ratio"])
    assert doc["best"] == best["label"]
    # one repetition: the top point is shown, but no verdict can call it best
    assert doc["verdict"]["significant"] is False and doc["verdict"]["best"] is None
    text = out.getvalue()
    assert "baseline (no assistant)" in text and f"top (not a verdict): {best['label']}" in text
    assert not [ln for ln in text.splitlines() if ln.startswith("* ")]
    md = (outcome.run_dir / "sweep.md").read_text()
    assert "verdict: no significant best" in md


@pytest.mark.slow  # a real transformers workload: six passes (57 s here)
def test_repeated_sweep_rotates_warms_up_and_gives_a_verdict(site, tmp_path):
    """Two points x 3 repetitions in one workload process: rotated order, one timing folder,
    report and window.json per pass (warm-up before each point's first pass only), intervals
    over the repetitions and a verdict on the paired ratios. k=1 and k=8 at the ci size differ
    a lot in accepted length; whatever the verdict, it must be stated and consistent."""
    from patchkit.report import load_timing_dir
    from patchkit.report.window import read_window

    outcome = run_sweep(
        tmp_path,
        size="ci",
        matrix="k=1,8",
        site=site,
        stream=io.StringIO(),
        chart=False,
        timeout=300,
        repeat=3,
    )
    status = ops.status(str(DEFAULT_SERIES), [str(site)], ops.Options(layout="installed"))
    assert status.hosts[0].state == "pristine"
    run_dir = outcome.run_dir
    doc = json.loads((run_dir / "sweep.json").read_text())
    assert doc["repeat"] == 3 and doc["warmup"] is True
    assert [(o["rep"], o["label"]) for o in doc["order"]] == [
        (1, "k=1"),
        (1, "k=8"),
        (2, "k=8"),
        (2, "k=1"),
        (3, "k=1"),
        (3, "k=8"),
    ]
    passes = outcome.workload["passes"]
    assert [(p["rep"], p["index"]) for p in passes] == [(0, 0), (0, 1), (1, 1), (1, 0), (2, 0), (2, 1)]
    for p in passes:
        assert (p["warmup_ns"] is not None) == (p["rep"] == 0)  # each point's first pass
    for row in doc["rows"]:
        assert row["reports"] == [row["reports"][0], row["reports"][0] + "/rep2", row["reports"][0] + "/rep3"]
        assert len(row["repeats"]) == len(row["ratios"]) == 3
        assert row["tokens_per_s"] in row["repeats"] and row["report"] in row["reports"]
        lo, hi = row["ratio_ci"]
        assert lo <= sorted(row["ratios"])[1] <= hi
        assert row["tokens_per_s_median"] == sorted(row["repeats"])[1]
        for rep, folder in enumerate(row["reports"]):
            window = read_window(run_dir / folder / "timing")
            assert window.start_unix_ns < window.end_unix_ns
            assert (window.warmup is not None) == (rep == 0)
            assert (run_dir / folder / "summary.json").is_file()
            procs = load_timing_dir(run_dir / folder / "timing")
            inside = sum(window.contains(p.wall_ns(c["t0"])) for p in procs for c in p.cycles)
            assert inside > 0
    # the passes of different points never overlap in time
    spans = sorted(tuple(p["window_ns"]) for p in passes)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    verdict = doc["verdict"]
    assert verdict["alpha"] == 0.05 and "Welch" in verdict["method"]
    assert verdict["cost"]["runs"] == 6 and verdict["cost"]["minutes"] > 0
    assert doc["best"] == verdict["top"]
    assert sorted(verdict["p_values"]) == sorted({"k=1", "k=8"} - {verdict["top"]})
    md = (run_dir / "sweep.md").read_text()
    assert "verdict:" in md and "verdict cost: 6 measured pass(es)" in md and "95% CI" in md
    if verdict["significant"]:
        assert verdict["best"] == doc["best"] and f"| **{doc['best']}** |" in md
    else:
        assert verdict["best"] is None and doc["best"] in verdict["indistinguishable"]


def test_cli_repeat_and_no_warmup_reach_the_sweep(tmp_path):
    """invoke profile.sweep passes --repeat through (a bad one: exit 2, nothing made)."""

    from support.upstream import REPO

    proc = invoke(
        "-r",
        str(REPO),
        "profile.sweep",
        "--repeat",
        "0",
        "--no-warmup",
        "--size",
        "ci",
        "--site",
        str(tmp_path / "no-site"),
        "--out",
        str(tmp_path / "out"),
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 2 and "--repeat '0': a whole number" in proc.stderr
    assert not (tmp_path / "out").exists()
