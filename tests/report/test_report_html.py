"""report.html without a browser: a server-like run on the fake clock (support.server_run), a
sweep document and a prediction, each page read back (support.report_page) and held against the
JSON it was made from. The same pages in headless Chromium, from real runs of the stand-in
server: tests/profile/test_report_pages.py."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from patchkit.report import build_report
from patchkit.report.html import write_prediction_page
from patchkit.report.html_page import EMBED_MAX_CHARS
from patchkit.report.html_sweep import write_sweep_page
from patchkit.report.predict import predict_run
from support.report_page import download_bytes, external_urls, printed_as, read_page, resolve
from support.requires import requires
from support.server_run import server_run

pytestmark = requires("matplotlib", reason="the report extra")

META = {
    "tokens_per_s": 1234.5,
    "baseline_tokens_per_s": 800.25,
    "series": "sglang-v0.5.12",
    "server_command": "python -m sglang.launch_server --model-path /m/Llama-3.1-8B --speculative-num-steps 3",
    "benchmark_command": "python -m sglang.bench_serving --num-prompts 200",
}


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("run")
    build_report(server_run(out / "timing"), out, meta=META)
    return out


def docs_of(folder: Path) -> dict:
    names = {"summary": "summary.json", "sweep": "sweep.json", "predict": "predict.json"}
    return {k: json.loads((folder / v).read_text()) for k, v in names.items() if (folder / v).is_file()}


def assert_numbers_are_the_documents(page, docs: dict) -> None:
    assert page.sourced, "no number on the page names its source"
    for s in page.sourced:
        value = resolve(docs, s.path)
        assert s.value == value, f"{s.path}: page says {s.value!r}, the file {value!r}"
        assert printed_as(value, s.text), f"{s.path}: {value!r} printed as {s.text!r}"


def test_run_page_holds_every_section_and_summary_jsons_numbers(run):
    page = read_page((run / "report.html").read_text())
    summary = json.loads((run / "summary.json").read_text())
    assert page.sections == ["run", "cycle", "timeline", "acceptance", "prediction", "trace", "table"]
    assert_numbers_are_the_documents(page, {"summary": summary})
    paths = [s.path for s in page.sourced]
    for phase, share in summary["decode_cycle"]["phase_shares"].items():
        assert ["summary", "decode_cycle", "phase_shares", phase] in paths, phase
        assert any(
            t.startswith("every decode cycle") and f"{phase} " in t and f"{share:.1f} %" in t
            for t in page.tooltips
        )
    assert ["summary", "throughput", "tokens_per_s"] in paths
    assert ["summary", "acceptance", "mean_accept_length", "pooled"] in paths
    assert ["summary", "warmup_cycles"] in paths and summary["warmup_cycles"] > 0
    # a bar per batch size (8 of them), the stall circled with its cycle, warm-up and window shaded
    assert {int(m) for t in page.tooltips for m in re.findall(r"^batch size (\d+) ", t)} == set(range(1, 9))
    (stall,) = summary["stalls"]["decode"]["cycles"]
    assert any(t.startswith(f"stall: cycle {stall['cycle']}, ") for t in page.tooltips)
    assert any(t.startswith("warm-up pass: ") for t in page.tooltips)
    assert any(t.startswith("measured window: ") for t in page.tooltips)


@pytest.mark.slow  # draws a chart of 14 batch sizes (about 2 s)
def test_many_batch_sizes_are_drawn_as_ranges_of_them(tmp_path):
    build_report(server_run(tmp_path / "timing", cycles=30 * 25, batch_sizes=30), tmp_path, meta=META)
    page = read_page((tmp_path / "report.html").read_text())
    bars = {m for t in page.tooltips for m in re.findall(r"^(batch sizes? [\d\u2013]+) ", t)}
    assert len(bars) == 12 and "batch sizes 1\u20132" in bars and "batch sizes 29\u201330" in bars, sorted(
        bars
    )


def test_run_page_fetches_nothing_and_carries_the_trace(run):
    html = (run / "report.html").read_text()
    page = read_page(html)
    assert page.csp is not None and "default-src 'none'" in page.csp
    assert page.scripts == 0 and external_urls(page) == []
    assert download_bytes(page.downloads["trace.json.gz"]) == (run / "trace.json").read_bytes()
    assert "ui.perfetto.dev" in html


def test_without_the_chart_the_text_outputs_are_unchanged(run, tmp_path):
    build_report(run / "timing", tmp_path, meta=META, chart=False)
    assert not (tmp_path / "report.html").exists()
    for name in ("table.txt", "trace.json"):
        assert (tmp_path / name).read_bytes() == (run / name).read_bytes(), name
    without, with_page = (json.loads((d / "summary.json").read_text()) for d in (tmp_path, run))
    assert with_page.pop("files") == {**without.pop("files"), "chart": "phases.png", "html": "report.html"}
    assert without == with_page


def test_a_trace_too_long_for_a_link_stays_beside_the_page(run, tmp_path, monkeypatch):
    from patchkit.report import html_page

    monkeypatch.setattr(html_page, "EMBED_MAX_CHARS", 1000)
    shutil.copytree(run, tmp_path / "run")
    from patchkit.report.html import write_run_page_from_folder

    page = read_page(write_run_page_from_folder(tmp_path / "run").read_text())
    assert page.downloads == {} and "trace" in page.sections
    assert EMBED_MAX_CHARS < 2 * 2**20  # under Chromium's longest URL


def test_a_summary_whose_timing_is_gone_still_gets_its_page(run, tmp_path):
    summary = json.loads((run / "summary.json").read_text())
    summary["timing_dir"] = str(tmp_path / "gone")  # where the run's timing was, on another machine
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    from patchkit.report.html import write_run_page_from_folder

    html = write_run_page_from_folder(tmp_path).read_text()
    page = read_page(html)
    assert page.sections == ["run", "cycle", "timeline", "acceptance", "prediction"]
    assert_numbers_are_the_documents(page, docs_of(tmp_path))
    assert "No timing files were read for this page" in html
    assert not any(
        re.match(r"batch sizes? \S+ \([\d,]+ cycles\)", t) for t in page.tooltips
    )  # no bars per size


def test_the_prediction_is_drawn_against_what_was_measured(run, tmp_path):
    shutil.copytree(run, tmp_path / "run")
    pred = predict_run(tmp_path / "run", bootstrap=50)
    (tmp_path / "run" / "predict.json").write_text(json.dumps(pred))
    page = read_page(write_prediction_page(tmp_path / "run", pred, ["to tell 2 from 3: a note"]).read_text())
    assert "prediction" in page.sections and "cycle" in page.sections
    assert_numbers_are_the_documents(page, docs_of(tmp_path / "run"))
    sourced = {json.dumps(s.path) for s in page.sourced}
    for p in pred["points"]:
        assert json.dumps(["predict", "points", {"num_steps": p["num_steps"]}, "ratio_ci95"]) in sourced
    assert json.dumps(["predict", "profiled", "tokens_per_s"]) in sourced
    assert any(
        t.startswith(f"measured at num-steps {pred['profiled']['num_steps']}: ") for t in page.tooltips
    )
    html = (tmp_path / "run" / "report.html").read_text()
    assert all(a.replace("'", "&#x27;") in html for a in pred["assumptions"]) and "to tell 2 from 3" in html
    # predict.json elsewhere: a page of the prediction alone
    alone = read_page(write_prediction_page(tmp_path, pred).read_text())
    assert alone.sections == ["prediction"]
    assert_numbers_are_the_documents(alone, {"predict": pred})


def sweep_doc() -> dict:
    def runs(label, values, blocks):
        return [
            {
                "tokens_per_s": v,
                "block": b,
                "rep": i + 1,
                "report": f"points/{label}" + (f"/rep{i + 1}" if i else ""),
            }
            for i, (v, b) in enumerate(zip(values, blocks))
        ]

    rows = [
        {"label": "num-steps=2", "tokens_per_s": 900.0, "tokens_per_s_median": 900.0, "tokens_per_s_ci": [850.0, 950.5],
         "accept_length": 2.5, "report": "points/01-a", "reports": ["points/01-a", "points/01-a/rep2"],
         "runs": runs("01-a", [880.0, 920.0], ["gpu0", "gpu1"]), "ok": True, "error": None},
        {"label": "num-steps=3", "tokens_per_s": 1000.0, "tokens_per_s_median": 1000.0, "tokens_per_s_ci": [970.0, 1031.0],
         "accept_length": 2.9, "report": "points/02-b", "reports": ["points/02-b", "points/02-b/rep2"],
         "runs": runs("02-b", [990.0, 1010.0], ["gpu1", "gpu0"]), "ok": True, "error": None},
        {"label": "num-steps=5", "tokens_per_s": 700.0, "tokens_per_s_median": 700.0, "tokens_per_s_ci": None,
         "accept_length": 3.1, "report": "points/03-c", "reports": ["points/03-c"],
         "runs": runs("03-c", [700.0], ["gpu0"]), "ok": True, "error": None},
    ]  # fmt: skip
    return {
        "schema": "patchkit.remote-sweep/1",
        "matrix": {"speculative-num-steps": ["2", "3", "5"]},
        "series": "/x/patches/sglang-v0.5.12",
        "targets": ["gpu1:/opt/site"],
        "server_command": "python -m sglang.launch_server --speculative-num-steps 3",
        "bench_command": "python -m sglang.bench_serving",
        "rows": rows,
        "verdict": {"best": "num-steps=3", "significant": True, "top": "num-steps=3", "sequential": True,
                    "cost": {"server_starts": 5, "minutes": 12.5}},
        "rounds": [
            {"round": 1, "points": ["num-steps=2", "num-steps=3", "num-steps=5"], "minutes": 6.0,
             "tokens_per_s": {"num-steps=2": 880.0, "num-steps=3": 990.0, "num-steps=5": 700.0}},
            {"round": 2, "points": ["num-steps=2", "num-steps=3"], "minutes": 12.5,
             "tokens_per_s": {"num-steps=2": 920.0, "num-steps=3": 1010.0}},
        ],
        "dropped": {"num-steps=5": {"round": 1, "reason": "below the leader: ratio < 1 at 95 %"}},
        "phase_verdict": {"leader": "num-steps=3", "alpha": 0.05, "points": {"num-steps=2": {
            "target_verify": {"ms": 0.9, "leader_ms": 1.2, "ratio": 0.75, "ratio_ci": [0.7, 0.8], "differs": True},
            "draft_forward": {"ms": 0.5, "leader_ms": 0.75, "ratio": 0.667, "ratio_ci": [1e-08, 5e7], "differs": False}}}},
        "plan": {"difference": 0.05, "points": {"num-steps=2": {"more_runs": 12, "minutes": 30.5, "spread": 0.02}}},
    }  # fmt: skip


SWEEP_TEXT = """sweep: 3 point(s)
  point ...

verdict: best num-steps=3 -- decided after 2 round(s)
dropped after round 1: num-steps=5 -- below the leader
to resolve a 5 % difference at the spread measured: num-steps=2: 12 more run(s), ~30.5 min
phases against num-steps=3 (ms per decode cycle):
  num-steps=2: target_verify 0.900 vs 1.200 ms (0.750x [0.700, 0.800])
tok/s: median of the repetitions
"""


def test_sweep_page_says_the_verdict_and_links_every_points_page(tmp_path):
    doc = sweep_doc()
    (tmp_path / "points/01-a").mkdir(parents=True)
    (tmp_path / "points/01-a/report.html").write_text("<!DOCTYPE html><title>a</title>")
    (tmp_path / "points/02-b").mkdir()
    (tmp_path / "points/02-b/table.txt").write_text("the table")  # a point without its page
    (tmp_path / "sweep.json").write_text(json.dumps(doc))
    html = write_sweep_page(tmp_path, doc, SWEEP_TEXT).read_text()
    page = read_page(html)
    assert page.sections == ["verdict", "points", "rounds", "phases", "plan", "sweep", "table"]
    assert_numbers_are_the_documents(page, {"sweep": doc})
    assert (
        'class="verdict">Best: <span' in html
        and "verdict: best num-steps=3 -- decided after 2 round(s)" in html
    )
    # one dot per start, by GPU; the dropped point marked in the rounds after its drop
    dots = [t for t in page.tooltips if re.match(r"num-steps=\d, start \d", t)]
    assert sorted(dots) == sorted(
        f"{r['label']}, start {run['rep']} on {run['block']}: {run['tokens_per_s']:,.1f} tok/s"
        for r in doc["rows"]
        for run in r["runs"]
    )
    assert html.count('<td class="note">dropped</td>') == 1
    assert "after round 1: <b>num-steps=5</b>" in html
    # the companion's red phase and its interval cut at the axis, written whole in the table
    assert any(
        t.startswith("num-steps=2, target_verify: 0.900 vs 1.200 ms") and t.endswith("differs")
        for t in page.tooltips
    )
    assert "[1e-08" in html and "5e+07]" in html
    links = [u for u in page.urls if u.startswith("points/")]
    assert "points/01-a/report.html" in links and "points/02-b/table.txt" in links  # no page: its table
    assert not any(link.startswith("points/03-c") for link in links) and "points/03-c" in html  # gone: named
    assert external_urls(page) == [] and page.scripts == 0
    assert "phases against" not in html.split('id="phases"')[0]  # said once, in its own section


@pytest.mark.slow  # 10,000 decode cycles through the whole report (about 15 s here)
def test_a_long_run_keeps_a_page_to_mail(tmp_path):
    build_report(server_run(tmp_path / "timing", cycles=10_000), tmp_path, meta=META)
    size = (tmp_path / "report.html").stat().st_size
    assert size < 1.5 * 2**20, size  # docs/decisions.md: about 1.0 MB, three quarters of it the trace
    page = read_page((tmp_path / "report.html").read_text())
    assert_numbers_are_the_documents(page, docs_of(tmp_path))
