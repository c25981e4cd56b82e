"""profile.sweep on the embedded default at the "ci" size: two points plus the baseline."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("huggingface_hub", reason="transformers' dependencies: the profile extra")

from patchkit import ops
from patchkit.errors import InvalidInput
from patchkit.profile import ensure_site, parse_matrix, run_sweep
from patchkit.profile.site import DEFAULT_SERIES
from patchkit.profile.sweep import expand, render

from upstream_fixtures import default_wheelhouse


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("sweep") / "tf-site"
    return ensure_site(DEFAULT_SERIES, dest, wheelhouse=default_wheelhouse(), log=lambda m: None)


def test_parse_matrix_and_expand():
    m = parse_matrix("num_assistant_tokens=2,8; conf=0,0.5")
    assert m == {"num_assistant_tokens": [2, 8], "assistant_confidence_threshold": [0.0, 0.5]}
    points = expand(m)
    assert [p["label"] for p in points] == ["k=2 conf=0", "k=2 conf=0.5", "k=8 conf=0",
                                            "k=8 conf=0.5"]
    assert all(p["schedule"] == "constant" for p in points)
    assert expand(parse_matrix("schedule=heuristic"))[0]["num_assistant_tokens"] == 4


@pytest.mark.parametrize("text", ["", "k=", "k=0", "topk=2", "conf=1.5", "k=two",
                                  "schedule=sometimes", "num_assistant_tokens"])
def test_bad_matrix_is_invalid_input(text):
    with pytest.raises(InvalidInput):
        parse_matrix(text)


def test_render_marks_the_best_row():
    rows = [{"label": "k=2", "tokens_per_s": 10.0, "ratio": 1.1, "accept_length": 2.5,
             "verify_share": 60.0, "draft_share": 30.0, "cycle_ms": 5.0, "basis": "device",
             "identical_outputs": "2/2"},
            {"label": "k=4", "tokens_per_s": 12.0, "ratio": 1.3, "accept_length": 3.5,
             "verify_share": 55.0, "draft_share": 40.0, "cycle_ms": 6.0, "basis": "device",
             "identical_outputs": "2/2"}]
    text = render(rows, {"tokens_per_s": 9.0}, rows[1], "head")
    marked = [ln for ln in text.splitlines() if ln.startswith("* ")]
    assert len(marked) == 1 and "k=4" in marked[0] and "1.30x" in marked[0]
    assert "best: k=4" in text and "device time" in text
    md = render(rows, {"tokens_per_s": 9.0}, rows[1], "head", markdown=True)
    assert "| **k=4** | **12.0** | **1.30x**" in md and "| k=2 | 10.0 | 1.10x" in md


def test_sweep_two_points_end_to_end(site, tmp_path):
    out = io.StringIO()
    outcome = run_sweep(tmp_path, size="ci", matrix={"num_assistant_tokens": [1, 4]}, site=site,
                        stream=out, chart=False, timeout=300)
    status = ops.status(str(DEFAULT_SERIES), [str(site)], ops.Options(layout="installed"))
    assert status.hosts[0].state == "pristine"

    doc = json.loads((outcome.run_dir / "sweep.json").read_text())
    assert doc["schema"] == "patchkit.sweep/1" and [r["label"] for r in doc["rows"]] == ["k=1", "k=4"]
    assert doc["baseline"]["tokens_per_s"] > 0
    work = outcome.workload
    for row, point in zip(doc["rows"], work["points"]):
        k = row["params"]["num_assistant_tokens"]
        assert 1.0 <= row["accept_length"] <= k + 1
        assert row["ratio"] == pytest.approx(row["tokens_per_s"] / row["baseline_tokens_per_s"])
        assert 0 < row["verify_share"] < 100 and 0 < row["draft_share"] < 100
        assert row["verify_share"] + row["draft_share"] < 100.5
        report = json.loads((outcome.run_dir / row["report"] / "summary.json").read_text())
        assert report["meta"]["tokens_per_s"] == row["tokens_per_s"]
        drafted = [c for c in report["phases"] if c["name"] == "draft_generate"]
        assert drafted and drafted[0]["count"] > 0
    # k=1 drafts one token per cycle: accepted length is at most 2, and it needs more cycles
    k1, k4 = doc["rows"]
    assert k1["accept_length"] <= 2.0 < k4["accept_length"]
    assert work["points"][0]["assisted"]["target_forwards"] > \
        work["points"][1]["assisted"]["target_forwards"]
    best = max(doc["rows"], key=lambda r: r["ratio"])
    assert doc["best"] == best["label"]
    text = out.getvalue()
    assert "baseline (no assistant)" in text and f"best: {best['label']}" in text
    assert [ln for ln in text.splitlines() if ln.startswith("* ")][0].split()[1] == best["label"]
    md = (outcome.run_dir / "sweep.md").read_text()
    assert f"| **{best['label']}** |" in md
