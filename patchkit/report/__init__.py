"""Reports from phase-timer output: terminal table, Perfetto trace, PNG chart, summary JSON.

    from patchkit.report import build_report, render_table
    summary = build_report("patchkit-timing", "profile-out/run1",
                           meta={"tokens_per_s": 120.0, "baseline_tokens_per_s": 73.0})
    print(render_table(summary))

`meta` keys with a meaning: tokens_per_s, baseline_tokens_per_s (measured by the caller),
tokens_per_s_runs, baseline_tokens_per_s_runs (repeated measurements: median and range are
printed), accept_length (as reported by a benchmark; else it is derived from the cycles'
attrs), model, worker (the chart's title; else taken from server_command), all snake_case;
any other key is printed as a line (patchkit.report.table.meta_lines says it in words) and kept
in summary.json. summary.json's ``units`` names the unit of every number by key name.
"""

from __future__ import annotations

import json
from pathlib import Path

from patchkit.report.counts import cycle_counts
from patchkit.report.load import ProcessTiming, load_timing_dir
from patchkit.report.summarize import Summary, select, summarize
from patchkit.report.table import render_table
from patchkit.report.trace import build_trace
from patchkit.report.trust import trust_warnings

__all__ = [
    "OUTPUT_FILES",
    "ProcessTiming",
    "Summary",
    "build_report",
    "build_trace",
    "load_timing_dir",
    "render_table",
    "select",
    "summarize",
]

OUTPUT_FILES = {
    "table": "table.txt",
    "trace": "trace.json",
    "chart": "phases.png",
    "summary": "summary.json",
    "html": "report.html",
}


def prediction_headline(selection, meta: dict, where: str) -> dict | None:
    """summary.json's ``prediction``: the what-if's best num-steps and ratios (no bootstrap),
    or None where the records cannot carry one (no per-request acceptance, topk > 1, ...)."""
    from patchkit.errors import InvalidInput
    from patchkit.report.predict import predict_selection

    try:
        pred = predict_selection(selection, meta, where, bootstrap=0)
    except InvalidInput:  # records that cannot carry one; anything else is a bug to see
        return None
    return {
        "profiled_num_steps": pred["profiled"]["num_steps"],
        "best_num_steps": pred["best"]["num_steps"],
        "ratio_by_num_steps": {str(p["num_steps"]): p["ratio_to_profiled"] for p in pred["points"]},
        # what the ratios are of: the whole benchmark replayed, or decode cycles' tokens/s
        "ratio_of": "benchmark" if pred.get("simulation") else "decode",
        "engine": pred["engine"],
    }


def _time_split(selection) -> dict | None:
    from patchkit.report.benchsim import time_split

    if not selection.procs:
        return None
    lead = min(selection.procs, key=lambda p: p.rank)
    return time_split(lead.cycles, selection.stall_sets[selection.procs.index(lead)])


def build_report(
    timing_dir,
    out_dir,
    meta: dict | None = None,
    chart: bool = True,
    baseline: dict | None = None,
    window=None,
) -> Summary:
    """Read every rank's JSON-lines files in `timing_dir`; write the outputs to `out_dir`: the
    table, trace and summary, and with `chart` (matplotlib) phases.png and report.html.

    `baseline`: a run without speculation measured beside this one, kept as summary.json's
    "baseline" (see Summary). `window`: the measured window (patchkit.report.window.Window);
    None reads ``window.json`` from `timing_dir` when there is one. Only the cycles that start
    inside it are described, in every output (the rest are counted as warm-up / after it).
    Raises patchkit.errors.InvalidInput when the directory holds no readable timing.
    """
    procs = load_timing_dir(timing_dir)
    selection = select(procs, str(timing_dir), window)
    summary = summarize(procs, str(timing_dir), meta, selection=selection)
    summary.baseline = baseline
    summary.prediction = prediction_headline(selection, summary.meta, str(timing_dir))
    summary.time_split = _time_split(selection)
    summary.cycle_counts = cycle_counts(selection)
    summary.warnings = trust_warnings(summary)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    # json.dumps, not json.dump: one call of the C encoder instead of the pure-Python one that
    # json.dump's chunked writes take (the same text, several times faster on a long run)
    (out / OUTPUT_FILES["trace"]).write_text(
        json.dumps(build_trace(selection.procs, stalls=selection.stall_sets)), encoding="utf-8"
    )
    files["trace"] = OUTPUT_FILES["trace"]
    if chart:
        from patchkit.report.chart import write_chart

        write_chart(selection.procs, summary, out / OUTPUT_FILES["chart"], stalls=selection.stall_sets)
        files["chart"] = OUTPUT_FILES["chart"]
    table = render_table(summary)
    (out / OUTPUT_FILES["table"]).write_text(table, encoding="utf-8")
    files["table"] = OUTPUT_FILES["table"]
    files["summary"] = OUTPUT_FILES["summary"]
    if chart:
        files["html"] = OUTPUT_FILES["html"]
    summary.files = files
    document = summary.to_dict()
    (out / OUTPUT_FILES["summary"]).write_text(
        json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    if chart:  # the page prints summary.json's numbers: made from the document just written
        from patchkit.report.html import write_run_page

        write_run_page(out, json.loads(json.dumps(document)), selection)
    return summary
