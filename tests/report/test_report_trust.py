"""What makes the report trustworthy at a glance, over synthetic timing files:
p99 only over enough cycles, a child never above its parent, one number format per column,
a chart that names its run, and tok/s with its spread."""

import json
import random
import re
from datetime import UTC, datetime

import pytest

from patchkit.report import build_report, load_timing_dir, render_table
from patchkit.report.summarize import P99_MIN_N, select, summarize
from support.timing_files import header

WALL_T0 = 1_764_600_000_000_000_000  # 2025-12-01 14:40 UTC


def _write(folder, cycles, pid=1):
    """cycles: [(kind, [(name, depth, parent, ns), ...], glue_ns)] laid end to end."""
    folder.mkdir(parents=True, exist_ok=True)
    recs = [header(pid=pid, wall_t0_ns=WALL_T0)]
    t = 0
    for i, (kind, phases, glue) in enumerate(cycles):
        start, pos, open_at = t, t, {}
        for name, depth, parent, ns in phases:
            at = open_at.get(parent, pos) if depth else pos
            recs.append(
                {
                    "kind": "phase",
                    "name": name,
                    "cycle": i,
                    "depth": depth,
                    "parent": parent,
                    "t0": at,
                    "t1": at + ns,
                    "host_ns": ns,
                    "dev_ns": None,
                    "dev_off_ns": None,
                    "graph": False,
                    "captured": False,
                }
            )
            if depth == 0:
                open_at[name] = at
                pos = at + ns
        t = pos + glue
        recs.append(
            {
                "kind": "cycle",
                "cycle": i,
                "t0": start,
                "t1": t,
                "host_ns": t - start,
                "dev_ns": None,
                "dev_gap_ns": None,
                "attrs": {"kind": kind, "batch_size": 4, "accepted": 4},
            }
        )
        t += 1000
    (folder / f"phase-timing.rank0.pid{pid}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return folder


def _decode(n, seed=1, small_ns=20_000):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        long_draft = i % 10 == 0
        draft = 5_000_000 if long_draft else 1_000_000 + rng.randrange(100_000)
        phases = [("draft", 0, None, draft)]
        if long_draft:  # a child that runs only in the long calls of its parent
            phases.append(("draft_extend", 1, "draft", 4_000_000))
        phases += [
            ("verify", 0, None, 3_000_000 + rng.randrange(300_000)),
            ("bookkeeping", 0, None, small_ns),
        ]
        out.append(("decode", phases, 200_000))
    return out


def _cells(table: str) -> list[list[str]]:
    """The grid's rows (phase name, then the numeric columns) as lists of cells: the lines
    under the dashes as wide as they are whose count cell is a number (titles and the lines
    under each kind are not)."""
    lines = table.splitlines()
    dash = next(i for i, x in enumerate(lines) if x and set(x.replace(" ", "")) == {"-"})
    widths = [len(part) for part in lines[dash].split("  ")]
    rows = []
    for line in lines[dash + 1 :]:
        if not line.strip():
            break
        cells, pos = [], 0
        for w in widths:
            cells.append(line[pos : pos + w].strip())
            pos += w + 2
        if len(line) == len(lines[dash]) and cells[1].isdigit():
            rows.append(cells)
    return rows


def test_p99_only_over_enough_cycles(tmp_path):
    few = build_report(_write(tmp_path / "few", _decode(50)), tmp_path / "a", chart=False)
    many = build_report(_write(tmp_path / "many", _decode(150)), tmp_path / "b", chart=False)
    verify_few, verify_many = few.phase("verify"), many.phase("verify")
    assert verify_few["per_cycle_host_ms"]["n"] == 50 < P99_MIN_N
    assert verify_few["per_cycle_host_ms"]["p99"] is None
    assert verify_many["per_cycle_host_ms"]["p99"] is not None
    few_rows, many_rows = _cells(render_table(few)), _cells(render_table(many))
    assert {r[7] for r in few_rows} == {f"n<{P99_MIN_N}"}  # host p99 column
    assert all(re.fullmatch(r"\d+\.\d{3}", r[7]) for r in many_rows)
    assert f"p99 only over >= {P99_MIN_N} cycles" in render_table(few)


def test_a_child_never_exceeds_its_parent(tmp_path):
    summary = build_report(_write(tmp_path / "t", _decode(200)), tmp_path / "r", chart=False)
    parent, child = summary.phase("draft"), summary.phase("draft_extend", parent="draft")
    # per call the child (4 ms, in one cycle in ten) is above its parent's mean call
    assert child["host_ms"]["mean"] > parent["host_ms"]["mean"]
    # over the same cycles it cannot be
    p, c = parent["per_cycle_host_ms"], child["per_cycle_host_ms"]
    assert p["n"] == c["n"] == 200
    assert c["mean"] == pytest.approx(0.4, rel=1e-6)
    for key in ("mean", "p50", "p99", "max"):
        assert c[key] <= p[key], key
    assert child["share_of_cycle"] <= parent["share_of_cycle"]
    # the share is the mean per cycle over the mean cycle
    cycle_mean = summary.cycle["host_ms"]["mean"]
    assert parent["share_of_cycle"] == pytest.approx(100 * p["mean"] / cycle_mean)
    rows = {r[0].strip(): r for r in _cells(render_table(summary))}
    assert float(rows["draft_extend"][5]) <= float(rows["draft"][5])  # host mean column
    assert "share = mean phase / mean cycle (the share uses the mean; p50 is the median)" in render_table(
        summary
    )


def test_one_number_format_per_column(tmp_path):
    cycles = _decode(120)
    # prefill cycles of 150 ms: three digits before the point in the same columns
    cycles += [("prefill", [("target_extend", 0, None, 150_000_000 + i)], 100_000) for i in range(5)]
    summary = build_report(_write(tmp_path / "t", cycles), tmp_path / "r", chart=False)
    rows = _cells(render_table(summary))
    assert any(r[0].strip() == "target_extend" for r in rows)
    for col in (5, 6):  # host mean, host p50
        values = [r[col] for r in rows if r[col] != "-"]
        assert any(float(v) >= 100 for v in values) and any(float(v) < 1 for v in values)
        assert all(re.fullmatch(r"\d+\.\d{3}", v) for v in values), values
    assert all(re.fullmatch(r"\d+\.\d%", r[8]) for r in rows if r[8] != "-")
    assert all(re.fullmatch(r"\d+", r[1]) for r in rows)


def _figure(folder, meta):
    import matplotlib.pyplot as plt

    from patchkit.report.chart import figure

    procs = load_timing_dir(folder)
    sel = select(procs, str(folder))
    summary = summarize(procs, str(folder), meta, selection=sel)
    fig = figure(sel.procs, summary, sel.stall_sets)
    fig.canvas.draw()
    return fig, summary, plt


@pytest.mark.slow  # draws two charts (about 2 s)
def test_chart_names_the_run_and_keeps_the_bars_clear(tmp_path):
    folder = _write(tmp_path / "t", _decode(450, small_ns=15_000))
    meta = {
        "server command": "python -m sglang.launch_server --model-path /models/Llama-3.1-8B "
        "--speculative-algorithm EAGLE3",
        "speculative worker (server log)": "EAGLEWorkerV2",
    }
    fig, summary, plt = _figure(folder, meta)
    try:
        title = fig._suptitle.get_text()
        date = datetime.fromtimestamp(WALL_T0 / 1e9, tz=UTC).strftime("%Y-%m-%d")
        assert title.startswith("Llama-3.1-8B | worker EAGLEWorkerV2 | timer host | " + date)
        ax_run, ax_share = fig.axes[:2]
        # the bin size on the axis: 450 cycles in 200 bars
        assert "1 bar = mean of 2.2 cycles" in ax_run.get_xlabel()
        # the legend is outside the bars' axes
        renderer = fig.canvas.get_renderer()
        legend = ax_run.get_legend().get_window_extent(renderer)
        for ax in (ax_run, ax_share):
            box = ax.get_window_extent(renderer)
            assert not legend.overlaps(box)
        labels = [t.get_text() for t in ax_run.get_legend().get_texts()]
        assert any(x.startswith("verify (") and x.endswith("%)") for x in labels)
        # the small phase (15 us of a ~4.5 ms cycle, 0.3%) is a labelled bar of its own
        share = summary.phase("bookkeeping")["share_of_cycle"]
        assert share < 1.0
        names = [t.get_text() for t in ax_share.get_yticklabels()]
        assert "bookkeeping" in names
        # labelled with its 95% interval, over the same cycles as the table's
        lo, hi = summary.phase("bookkeeping")["share_ci95"]
        assert f"{share:.1f}% [{lo:.1f}\u2013{hi:.1f}]" in [t.get_text() for t in ax_share.texts]
    finally:
        plt.close(fig)
    # without a model in meta, the workload names it; one bar per cycle says so
    small = _write(tmp_path / "s", _decode(30))
    fig, _, plt = _figure(small, {"workload": "random Llama 2x64 target, 1-layer draft; ..."})
    try:
        assert fig._suptitle.get_text().startswith("random Llama 2x64 target, 1-layer draft | timer host")
        assert "1 bar = 1 cycle, 30 cycles" in fig.axes[0].get_xlabel()
    finally:
        plt.close(fig)
    out = tmp_path / "r"
    build_report(folder, out, meta=meta)
    assert (out / "phases.png").read_bytes()[:4] == b"\x89PNG"


def test_tokens_per_s_shows_its_spread(tmp_path):
    folder = _write(tmp_path / "t", _decode(20))
    meta = {
        "tokens_per_s_runs": [101.0, 95.0, 110.0, 99.0, 104.0],
        "baseline_tokens_per_s_runs": [80.0, 82.0, 78.0],
    }
    summary = build_report(folder, tmp_path / "r", meta=meta, chart=False)
    tp = summary.throughput
    assert tp["tokens_per_s"] == tp["tokens_per_s_median"] == 101.0
    assert tp["tokens_per_s_range"] == [95.0, 110.0]
    assert tp["baseline_tokens_per_s"] == 80.0
    assert tp["speedup"] == pytest.approx(101.0 / 80.0)
    table = render_table(summary)
    assert "tokens/s with speculation over 5 run(s): median 101.0, range 95.0 .. 110.0" in table
    assert "tokens/s without speculation over 3 run(s): median 80.0, range 78.0 .. 82.0" in table
    assert "tokens_per_s_runs:" not in table  # not repeated as a raw meta line
    # a single value given by the caller stays the headline; the runs add the spread
    one = build_report(
        folder,
        tmp_path / "r2",
        chart=False,
        meta={"tokens_per_s": 100.0, "tokens_per_s_runs": [90.0, 100.0, 120.0]},
    )
    assert one.throughput["tokens_per_s"] == 100.0
    assert one.throughput["tokens_per_s_range"] == [90.0, 120.0]


def _ab_run(folder, n_blocks, block, base_ns, slope_ns, timed_pct, seed=3):
    """A PATCHKIT_TIMER_AB=block run of decode cycles whose period grows by slope_ns per cycle
    (sequences getting longer) with a little noise; timed blocks' cycles last timed_pct more."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    recs = [header(wall_t0_ns=WALL_T0, ab_cycles=block)]
    t = 0
    for i in range(n_blocks * block):
        timed = i // block % 2 == 0
        period = (base_ns + slope_ns * i) * (1 + (timed_pct / 100 if timed else 0))
        period = int(period * (1 + rng.uniform(-0.002, 0.002)))
        recs.append(
            {
                "kind": "cycle",
                "cycle": i,
                "t0": t,
                "t1": t + period // 2,
                "host_ns": period // 2,
                "dev_ns": None,
                "dev_gap_ns": None,
                "ab": "events" if timed else "off",
                "attrs": {"kind": "decode", "batch_size": 32},
            }
        )
        t += period
    (folder / "phase-timing.rank0.pid7.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return folder


@pytest.mark.parametrize("slope_ns", [2_000, -2_000, 0])
def test_ab_overhead_is_not_fooled_by_a_drifting_cycle(tmp_path, slope_ns):
    """Decode cycles slow down as sequences grow (v1 on the H200: -1.57 % against the next off
    block, +2.17 % against the one before, one run). Timed blocks 1 % slower on a period that
    drifts by 0.1 % per cycle: each timed block against both of its neighbours gives +1 %;
    against only the next off block, as the report once did, the drift alone would read
    several points (checked here from the blocks the summary keeps)."""
    from patchkit.report.overhead import paired_overhead

    procs = load_timing_dir(_ab_run(tmp_path / "t", 40, 20, 2_000_000, slope_ns, 1.0))
    ov = paired_overhead(procs, "decode")
    assert ov["pairs"] == 19 and ov["pairing"].startswith("each timed block against the mean")
    assert abs(ov["median_pct"] - 1.0) < 0.15, ov["median_pct"]
    med = {b[2]: (b[3], b[4]) for b in ov["blocks"]}
    assert len(med) == 40 and med[0][0] == "events" and med[1][0] == "off"
    next_only = [100 * (med[i][1] - med[i + 1][1]) / med[i + 1][1] for i in range(0, 38, 2)]
    bias = sorted(next_only)[len(next_only) // 2] - 1.0
    if slope_ns:  # the estimator it replaced reads the drift as overhead
        assert abs(bias) > 1.0 and (bias < 0) == (slope_ns > 0), bias
    else:
        assert abs(bias) < 0.15, bias
