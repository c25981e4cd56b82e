"""report.html of one run: what table.txt, summary.json, trace.json and predict.json say, as
one page a person opens offline (the frame: patchkit.report.html_page; figures: inline SVG from
matplotlib, patchkit.report.svgfig, a tooltip on every mark).

    write_run_page(out_dir, summary_dict, selection)      # build_report does this
    write_run_page_from_folder(run_dir)                   # again, with predict.json (profile.predict)

Sections: the run (series, release, GPU, commands, sampling, warm-up window, tokens/s, the
timer's cost), the decode cycle (a stacked bar of the top-level phases with their 95 %
intervals, for all decode cycles and per batch size), the timeline (every cycle's time over
the run, the warm-up and stalls marked), acceptance, the prediction, the trace to save, and
table.txt itself. Every number that summary.json holds is printed from it (html_page's data-k).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from patchkit.report.bootstrap import DASH
from patchkit.report.html_page import (
    PAGE_FILE,
    S,
    esc,
    facts,
    figure,
    fmt,
    interval,
    num,
    page,
    section,
    table,
    trace_download,
)
from patchkit.report.html_predict import prediction_page, prediction_section
from patchkit.report.kinds import KIND_PRIMARY, NO_KIND, cycle_kind
from patchkit.report.svgfig import PALETTE, UNTIMED, SvgFigure, plain_log_ticks

MAX_BATCH_BARS = 12  # batch sizes drawn as their own bar: the ones with the most cycles
TIMELINE_POINTS = 1500  # above this many cycles the timeline draws each bin's range and median


def write_run_page(
    out_dir, summary: dict, selection, prediction: dict | None = None, notes: list[str] | None = None
) -> Path:
    """report.html in ``out_dir`` (beside table.txt, summary.json and trace.json); the
    prediction is ``prediction``, else the folder's predict.json when it has one."""
    out = Path(out_dir)
    if prediction is None and (out / "predict.json").is_file():
        prediction = json.loads((out / "predict.json").read_text(encoding="utf-8"))
    html = render_run_page(out, summary, selection, prediction, notes)
    path = out / PAGE_FILE
    path.write_text(html, encoding="utf-8")
    return path


def write_run_page_from_folder(
    run_dir, prediction: dict | None = None, notes: list[str] | None = None
) -> Path:
    """The page of a report folder (summary.json and its timing), e.g. with a prediction added.
    A summary.json whose timing files are gone still gets a page, without the figures that
    need every cycle (the timeline, the bars per batch size)."""
    from patchkit.errors import InvalidInput
    from patchkit.report.load import load_timing_dir
    from patchkit.report.summarize import select

    run = Path(run_dir)
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    timing = summary.get("timing_dir") or str(run / "timing")
    if not Path(timing).is_dir():
        timing = str(run / "timing")
    selection: Any
    try:
        selection = select(load_timing_dir(timing), timing)
    except InvalidInput:  # no timing files left: the summary alone
        selection = SimpleNamespace(procs=[], full=[], stall_sets=[])
    return write_run_page(run, summary, selection, prediction, notes)


def write_prediction_page(folder, pred: dict, notes: list[str] | None = None) -> Path:
    """report.html beside predict.json: the run's page with the prediction in it where the
    folder is a report folder (summary.json), else a page of the prediction alone."""
    folder = Path(folder)
    if (folder / "summary.json").is_file():
        return write_run_page_from_folder(folder, pred, notes)
    path = folder / PAGE_FILE
    path.write_text(prediction_page(pred, notes), encoding="utf-8")
    return path


def render_run_page(
    out: Path, s: dict, selection, prediction: dict | None, notes: list[str] | None = None
) -> str:
    from patchkit.report.chart import chart_title

    title = chart_title(
        SimpleNamespace(meta=s.get("meta") or {}, mode=s.get("mode"), sampling=s.get("sampling")),
        selection.full,
    )
    sections = [
        ("run", "the run", "The run", _header(s)),
        ("cycle", "decode cycle", "Where a decode cycle's time goes", _cycle(s, selection)),
        ("timeline", "timeline", "Cycles over the run", _timeline(s, selection)),
    ]
    if s.get("acceptance"):
        sections.append(("acceptance", "acceptance", "Acceptance", _acceptance(s["acceptance"])))
    pred = prediction_section(prediction, s, notes)
    if pred:
        sections.append(("prediction", "prediction", "Prediction against measured", pred))
    if (out / "trace.json").is_file():
        sections.append(("trace", "trace", "The trace", trace_download(out / "trace.json")))
    if (out / "table.txt").is_file():
        text = (out / "table.txt").read_text(encoding="utf-8")
        body = f"<details><summary>the whole table</summary><pre>{esc(text)}</pre></details>"
        sections.append(("table", "table.txt", "table.txt", body))
    html = "".join(section(sid, name, body) for sid, _, name, body in sections)
    subtitle = f"patchkit report of {esc(out.name)}"
    return page(title, subtitle, [(sid, nav) for sid, nav, _, _ in sections], html)


# ---- the header ---------------------------------------------------------------------------------


def _release(meta: dict) -> str:
    series = str(meta.get("series") or "")
    if "-v" in series:
        name, version = series.rsplit("-v", 1)
        return f"{esc(name)} {esc(version)}"
    if meta.get("transformers_version"):
        return f"transformers {esc(meta['transformers_version'])}"
    return ""


def _gpu(s: dict) -> str:
    names = sorted({str(r["cuda_device"]) for r in s.get("ranks") or [] if r.get("cuda_device")})
    ranks = len(s.get("ranks") or [])
    if names:
        return f"{esc(', '.join(names))} ({ranks} rank{'s' if ranks != 1 else ''})"
    return f"none recorded: timer mode {esc(s.get('mode'))}, {ranks} rank{'s' if ranks != 1 else ''} (host time only)"


def _sampling(s: dict) -> str:
    sampling = s.get("sampling")
    cycles = (s.get("cycle") or {}).get("count")
    if not sampling:
        return f"every cycle timed ({fmt(cycles, 'd')} cycles)"
    budget = sampling.get("budget")
    if sampling.get("every"):
        head = f"about 1 cycle in {esc(sampling['every'])} timed ({esc(sampling.get('method'))}, seed {esc(sampling.get('seed'))})"
    elif budget:
        head = f"a budget of {fmt(budget.get('pct'), 'g')} % of the cycle period ({esc(budget.get('controller'))})"
    else:
        head = "sampled"
    timed = sampling.get("timed_cycles")
    return f"{head}: {fmt(timed, 'd')} of {fmt(sampling.get('cycles'), 'd')} cycles timed"


def _window(s: dict) -> str:
    window = s.get("window")
    warm = s.get("warmup_cycles") or 0
    after = s.get("after_window_cycles") or 0
    meta = s.get("meta") or {}
    if not window:
        how = "no measured window recorded: every cycle is described"
        return how + (f"; warm-up: {esc(meta['warmup_command'])}" if meta.get("warmup_command") else "")
    measured = window.get("measured") or {}
    span = ""
    if measured.get("end_unix_ns") and measured.get("start_unix_ns"):
        span = f" of {(measured['end_unix_ns'] - measured['start_unix_ns']) / 1e9:.2f} s"
    text = (
        f"measured window{span} from {esc(window.get('source'))}: "
        f"{num(warm, ',d', key=S('warmup_cycles'), tag='span')} warm-up cycles before it and "
        f"{num(after, ',d', key=S('after_window_cycles'), tag='span')} after it left out"
    )
    if meta.get("warmup_command"):
        text += f"; warm-up: {esc(meta['warmup_command'])}"
    return text


def _throughput(s: dict) -> str:
    t = s.get("throughput") or {}
    parts = []
    if t.get("tokens_per_s") is not None:
        parts.append(
            f'<span class="big">{num(t["tokens_per_s"], ",.1f", key=S("throughput", "tokens_per_s"), tag="span")} tok/s</span>'
        )
    if t.get("baseline_tokens_per_s") is not None:
        parts.append(
            f"without speculation {num(t['baseline_tokens_per_s'], ',.1f', key=S('throughput', 'baseline_tokens_per_s'), tag='span')} tok/s"
        )
    if t.get("speedup") is not None:
        parts.append(f"speedup {num(t['speedup'], '.2f', 'x', key=S('throughput', 'speedup'), tag='span')}")
    return "; ".join(parts) if parts else "not measured (no benchmark output given)"


def _timer_cost(s: dict) -> str:
    over = s.get("overhead")
    if over and over.get("median_pct") is not None:
        iqr = over.get("iqr_pct") or [None, None]
        return (
            f"{num(over['median_pct'], '+.2f', ' %', key=S('overhead', 'median_pct'), tag='span')} of the cycle period, "
            f"median of {over['pairs']} timed blocks against the untimed blocks around them "
            f"(IQR {fmt(iqr[0], '+.2f')}..{fmt(iqr[1], '+.2f')} %)"
        )
    budget = ((s.get("sampling") or {}).get("budget")) or {}
    if budget.get("spent_pct") is not None:
        return (
            f"~{num(budget['spent_pct'], '.2f', ' %', key=S('sampling', 'budget', 'spent_pct'), tag='span')} of the cycle period "
            f"spent (the budget's own account: {fmt(budget.get('cost_us'), '.0f')} µs per timed cycle, period "
            f"{fmt(budget.get('period_ms'), '.2f')} ms)"
        )
    return (
        "not measured in this run (PATCHKIT_TIMER_AB=N pairs timed and untimed cycles in one process); "
        "what it costs on the H200 is in bench/RESULTS.md"
    )


def _header(s: dict) -> str:
    meta = s.get("meta") or {}
    cmd = lambda key: f"<code>{esc(meta[key])}</code>" if meta.get(key) else ""  # noqa: E731
    env = meta.get("server_environment")
    items = [
        ("tokens/s", _throughput(s)),
        ("series", esc(meta.get("series") or "")),
        ("release", _release(meta)),
        ("worker", esc(meta.get("worker") or "")),
        ("workload", esc(meta.get("workload") or "")),
        ("GPU", _gpu(s)),
        ("server command", cmd("server_command")),
        ("server environment", f"<code>{esc(env)}</code>" if env else ""),
        ("benchmark command", cmd("benchmark_command")),
        ("benchmark", esc(meta.get("benchmark") or "")),
        ("sampling", _sampling(s)),
        ("warm-up", _window(s)),
        ("timer's cost", _timer_cost(s)),
        (
            "cycles",
            f"{num((s.get('cycle') or {}).get('count'), ',d', key=S('cycle', 'count'), tag='span')} described, timer mode {esc(s.get('mode'))}, {esc(s.get('basis'))} time",
        ),
    ]
    return facts(items)


# ---- the decode cycle -----------------------------------------------------------------------------


def _decode_kind(s: dict) -> str | None:
    kinds = s.get("cycle_kinds") or {}
    return KIND_PRIMARY if KIND_PRIMARY in kinds else NO_KIND if NO_KIND in kinds else None


def _top_phases(s: dict) -> list[dict]:
    kind = _decode_kind(s)
    phases = ((s.get("cycle_kinds") or {}).get(kind) or {}).get("phases") or []
    return [p for p in phases if not p.get("depth") and p.get("share_of_cycle") is not None]


def _per_batch(s: dict, selection, names: list[str]) -> list[tuple[str, list[tuple[float, list[float]]]]]:
    """The lead rank's steady timed decode cycles as (cycle ms, [ms of each top-level phase]),
    per batch size; more than MAX_BATCH_BARS sizes go in as many ranges of consecutive sizes."""
    if not selection.procs:
        return []
    lead_i = min(range(len(selection.procs)), key=lambda i: selection.procs[i].rank)
    proc, stalls = selection.procs[lead_i], selection.stall_sets[lead_i]
    field = "dev_ns" if s.get("basis") == "device" else "host_ns"
    kind = _decode_kind(s)
    parts: dict[int, dict[str, float]] = {}
    for r in proc.phases:
        if r.get("depth") == 0 and r.get("cycle") is not None and r.get(field) is not None:
            slot = parts.setdefault(r["cycle"], {})
            slot[r["name"]] = slot.get(r["name"], 0.0) + r[field] / 1e6
    groups: dict[int, list] = {}
    for c in proc.cycles:
        if cycle_kind(c) != kind or c["cycle"] in stalls or c.get("timed") is False or c.get("ab") == "off":
            continue
        size = (c.get("attrs") or {}).get("batch_size", c.get("batch_size"))
        if not isinstance(size, int) or c.get(field) is None:
            continue
        p = parts.get(c["cycle"], {})
        groups.setdefault(size, []).append((c[field] / 1e6, [p.get(n, 0.0) for n in names]))
    sizes = sorted(groups)
    if len(sizes) <= MAX_BATCH_BARS:
        return [(f"batch size {b}", groups[b]) for b in sizes]
    step = len(sizes) / MAX_BATCH_BARS
    ranges = [sizes[round(i * step) : round((i + 1) * step)] for i in range(MAX_BATCH_BARS)]
    return [(f"batch sizes {r[0]}{DASH}{r[-1]}", [row for b in r for row in groups[b]]) for r in ranges if r]


def _cycle(s: dict, selection) -> str:
    from matplotlib.patches import Patch

    from patchkit.report.bootstrap import ratio_intervals

    top = _top_phases(s)
    if not top:
        return '<p class="note">No timed decode cycle: nothing to break down.</p>'
    kind = _decode_kind(s)
    basis = "device" if s.get("basis") == "device" else "host"
    names = [p["name"] for p in top]
    colour = {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(names)}
    ms_key = "per_cycle_dev_ms" if basis == "device" else "per_cycle_host_ms"
    share_key = "share_of_cycle"
    kind_cycle = ((s.get("cycle_kinds") or {}).get(kind) or {}).get("cycle") or {}
    cycle_ms = (kind_cycle.get("dev_ms" if basis == "device" else "host_ms") or {}).get("mean")
    bars: list[tuple] = [
        (
            "every decode cycle",
            [(p[ms_key] or {}).get("mean") or 0.0 for p in top],
            cycle_ms,
            [p.get(share_key) for p in top],
            [p.get("share_ci95") for p in top],
            s["decode_cycle"].get("steady_cycles"),
        )
    ]
    per_batch = _per_batch(s, selection, names)
    for label, group in per_batch if len(per_batch) > 1 else []:  # one size: the first bar again
        n = len(group)
        total = sum(r[0] for r in group) / n
        means = [sum(r[1][i] for r in group) / n for i in range(len(names))]
        units = [[*parts, t] for t, parts in group]
        cis = ratio_intervals(units, [(i, len(names)) for i in range(len(names))])
        shares = [100.0 * m / total if total else None for m in means]
        bars.append((label, means, total, shares, cis, n))
    fig = SvgFigure("cycle", 10.5, 0.5 * len(bars) + 1.4)
    ax = fig.add_axes()
    for y, (label, means, total, shares, cis, n) in enumerate(bars):
        left = 0.0
        for name, m, share, ci in zip(names, means, shares, cis):
            rect = ax.barh(
                [y], [m], left=[left], color=colour[name], height=0.62, edgecolor="white", linewidth=0.6
            )[0]
            ci_text = f" [{ci[0]:.1f}{DASH}{ci[1]:.1f}]" if ci else ""
            fig.tip(
                rect,
                f"{label} ({n:,} cycles): {name} {m:.3f} ms per cycle, {fmt(share)} %{ci_text} of the cycle",
            )
            if share is not None and share >= 7:
                ax.text(left + m / 2, y, f"{share:.0f}%", ha="center", va="center", fontsize=8, color="white")
            left += m
        if total and total > left:
            rest = ax.barh([y], [total - left], left=[left], color=UNTIMED, height=0.62)[0]
            fig.tip(rest, f"{label}: {total - left:.3f} ms of the cycle outside the top-level phases")
        ax.text(
            max(total or 0, left), y, f"  {fmt(total, '.3f')} ms, {n:,} cycles", va="center", fontsize=8.5
        )
    ax.set_yticks(range(len(bars)), [b[0] for b in bars], fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel(f"ms per decode cycle ({basis} time; the segments' % are shares of the cycle)")
    ax.margins(x=0.16)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    handles = [Patch(color=colour[n], label=n) for n in names] + [
        Patch(color=UNTIMED, label="between phases")
    ]
    ax.legend(
        handles=handles,
        loc="lower center",
        bbox_to_anchor=(0.5, 1.0),
        ncol=min(len(names) + 1, 5),
        fontsize=8.5,
        frameon=False,
    )
    table_rows = []
    for p in top:
        table_rows.append(
            f'<td class="txt"><span class="swatch" style="background:{colour[p["name"]]}"></span>{esc(p["name"])}</td>'
            + num(
                (p.get(ms_key) or {}).get("mean"),
                ".3f",
                key=S("cycle_kinds", kind, "phases", {"name": p["name"]}, ms_key, "mean"),
            )
            + num(
                (p.get(ms_key) or {}).get("p50"),
                ".3f",
                key=S("cycle_kinds", kind, "phases", {"name": p["name"]}, ms_key, "p50"),
            )
            + num(p.get(share_key), ".1f", " %", key=S("decode_cycle", "phase_shares", p["name"]))
            + interval(p.get("share_ci95"), key=S("decode_cycle", "phase_shares_ci95", p["name"]))
        )
    dc = s["decode_cycle"]
    table_rows.append(
        '<td class="txt">top-level phases together</td><td></td><td></td>'
        + num(dc.get("top_level_share"), ".1f", " %", key=S("decode_cycle", "top_level_share"))
        + interval(dc.get("top_level_share_ci95"), key=S("decode_cycle", "top_level_share_ci95"))
    )
    stalls = (s.get("stalls") or {}).get(kind) or {}
    lead = (
        f'<p class="lead">{num(dc.get("steady_cycles"), ",d", key=S("decode_cycle", "steady_cycles"), tag="span")} steady decode cycles '
        f"({basis} time, every rank), stalls left out ({fmt(stalls.get('count'), ',d')})"
        + (
            ". The first bar is all of them; the others the lead rank's, per batch size"
            if len(bars) > 1
            else ""
        )
        + ". Brackets: the share's 95 % interval (a bootstrap over whole cycles).</p>"
    )
    return (
        lead
        + figure(fig.svg())
        + table(["phase", "ms per cycle", "median ms", "share", "95 % interval"], table_rows)
    )


# ---- the timeline -----------------------------------------------------------------------------------


def _timeline(s: dict, selection) -> str:
    if not selection.full:
        return (
            '<p class="note">No timing files were read for this page (summary.json alone): the timeline '
            "and the bars per batch size need every cycle.</p>"
        )
    lead = min(selection.full, key=lambda p: p.rank)
    cycles = sorted(
        (c for c in lead.cycles if isinstance(c.get("t0"), int) and c.get("host_ns") is not None),
        key=lambda c: c["t0"],
    )
    if not cycles:
        return '<p class="note">No cycles.</p>'
    field = "dev_ns" if s.get("basis") == "device" else "host_ns"
    t_first = cycles[0]["t0"]
    kept: set = set()
    stall_cycles: set = set()
    for p, st in zip(selection.procs, selection.stall_sets):
        if p.rank == lead.rank:
            kept |= {c["cycle"] for c in p.cycles}
            stall_cycles |= st
    kind = _decode_kind(s)
    label = "decode" if kind in (KIND_PRIMARY, NO_KIND) else str(kind)
    series: dict[str, tuple[list, list]] = {"main": ([], []), "other": ([], []), "outside": ([], [])}
    stall_pts = []
    for c in cycles:
        x = (c["t0"] - t_first) / 1e9
        ms = (c[field] if c.get(field) is not None else c["host_ns"]) / 1e6
        if c["cycle"] in stall_cycles:
            stall_pts.append((x, ms, c))
            continue
        which = "outside" if c["cycle"] not in kept else "main" if cycle_kind(c) == kind else "other"
        series[which][0].append(x)
        series[which][1].append(ms)
    fig = SvgFigure("timeline", 10.5, 3.4)
    ax = fig.add_axes()
    for lo, hi, colour, text in _window_spans(s, lead, t_first):
        band = ax.axvspan(lo, hi, color=colour, alpha=0.16, linewidth=0, label=text)
        fig.tip(band, f"{text}: {lo:.2f} s to {hi:.2f} s")
    xs, ys = series["main"]
    if len(xs) > TIMELINE_POINTS:
        _binned_line(ax, fig, xs, ys, label)
    elif xs:
        line = ax.plot(xs, ys, ".", markersize=3, color=PALETTE[0], label=f"{label} cycles")[0]
        fig.tip(line, f"{len(xs):,} {label} cycles in the measured window (lead rank {lead.rank})")
    for which, marker, colour, text in (
        ("other", "^", PALETTE[1], "prefill cycles"),
        ("outside", ".", "#9aa3ae", "cycles outside the measured window"),
    ):
        ox, oy = series[which]
        if ox:
            dots = ax.plot(ox, oy, marker, markersize=3, color=colour, label=text)[0]
            fig.tip(dots, f"{len(ox):,} {text}")
    for x, ms, c in stall_pts[:300]:
        mark = ax.plot(
            [x],
            [ms],
            "o",
            markersize=7,
            markerfacecolor="none",
            markeredgecolor="#d62728",
            markeredgewidth=1.4,
        )[0]
        batch = (c.get("attrs") or {}).get("batch_size", c.get("batch_size"))
        fig.tip(
            mark,
            f"stall: cycle {c['cycle']}, {ms:,.1f} ms at {x:.2f} s"
            + (f", batch size {batch}" if batch is not None else ""),
        )
    if stall_pts:
        ax.plot(
            [], [], "o", markerfacecolor="none", markeredgecolor="#d62728", label=f"stalls ({len(stall_pts)})"
        )
    ax.set_xlabel("seconds since the lead rank's first cycle")
    ax.set_ylabel(f"cycle time, ms ({'device' if field == 'dev_ns' else 'host'})")
    every = sorted(ys + series["other"][1] + series["outside"][1] + [p[1] for p in stall_pts])
    if every and every[-1] > 20 * max(every[len(every) // 2], 1e-9):
        ax.set_yscale("log")  # stalls run 100x a cycle: both readable
        plain_log_ticks(ax.yaxis)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.legend(fontsize=8, loc="lower left", bbox_to_anchor=(0, 1.0), ncol=3, frameon=False)
    median = sorted(ys)[len(ys) // 2] if ys else None
    note = (
        f'<p class="lead">Every cycle the lead rank (rank {lead.rank}) recorded, {len(cycles):,} in all, '
        f"warm-up included; median {esc(label)} cycle in the measured window {fmt(median, '.3f')} ms. Stalls "
        "(over 4x the median of their kind and 10 ms above it) are circled and left out of the shares.</p>"
    )
    return note + figure(fig.svg())


def _window_spans(s: dict, lead, t_first: int) -> list[tuple[float, float, str, str]]:
    """The warm-up pass and the measured window on the timeline's axis (the lead rank's clock)."""
    window = s.get("window") or {}
    clock = lead.header.get("clock") or {}
    if not window or clock.get("wall_t0_ns") is None or clock.get("host_t0_ns") is None:
        return []
    offset = clock["wall_t0_ns"] - clock["host_t0_ns"] + t_first  # unix ns of x = 0
    spans = []
    for key, colour, text in (
        ("warmup", "#f0b429", "warm-up pass"),
        ("measured", "#2ca02c", "measured window"),
    ):
        w = window.get(key) or {}
        if w.get("start_unix_ns") is not None and w.get("end_unix_ns") is not None:
            spans.append(
                ((w["start_unix_ns"] - offset) / 1e9, (w["end_unix_ns"] - offset) / 1e9, colour, text)
            )
    return spans


def _binned_line(ax, fig, xs, ys, label):
    """Many cycles: each bin's median as a line and its range as a band (size stays bounded)."""
    n = len(xs)
    size = n / TIMELINE_POINTS
    bx, lo, med, hi = [], [], [], []
    for b in range(TIMELINE_POINTS):
        chunk = sorted(ys[int(b * size) : int((b + 1) * size)])
        if chunk:
            bx.append(xs[int(b * size)])
            lo.append(chunk[0])
            med.append(chunk[len(chunk) // 2])
            hi.append(chunk[-1])
    band = ax.fill_between(bx, lo, hi, color=PALETTE[0], alpha=0.25, linewidth=0)
    fig.tip(band, f"the range of each bin of {size:.1f} {label} cycles")
    line = ax.plot(
        bx, med, color=PALETTE[0], linewidth=0.8, label=f"{label} cycles: median of each {size:.1f}"
    )[0]
    fig.tip(line, f"{n:,} {label} cycles in {len(bx)} bins: each bin's median")


# ---- acceptance -------------------------------------------------------------------------------------


def _acceptance(a: dict) -> str:
    hist = a.get("histogram") or []
    steps = a.get("request_steps") or 0
    fig = SvgFigure("acceptance", 10.5, 5.6)
    (h_ax, p_ax), (b_ax, o_ax) = fig.add_axes(2, 2)
    for k, count in enumerate(hist):
        bar = h_ax.bar([k], [count], color=PALETTE[0], width=0.7)[0]
        fig.tip(
            bar, f"{k} drafts accepted: {count:,} request steps ({100 * count / steps if steps else 0:.1f} %)"
        )
    h_ax.set_xticks(range(len(hist)))
    h_ax.set_xlabel("draft tokens accepted per request step")
    h_ax.set_ylabel("request steps")
    h_ax.set_title("histogram", fontsize=10)
    for key, colour, label in (
        ("position_rate", PALETTE[0], "accepted at k (of those that drafted k)"),
        ("conditional_rate", PALETTE[1], "accepted at k (of those that accepted k-1)"),
    ):
        pts = [p for p in a.get(key) or [] if p.get("rate") is not None]  # None: no request reached k
        p_ax.plot(
            [p["position"] for p in pts],
            [p["rate"] for p in pts],
            "-",
            color=colour,
            label=label,
            linewidth=1.2,
        )
        for p in pts:
            dot = p_ax.plot([p["position"]], [p["rate"]], "o", color=colour, markersize=5)[0]
            fig.tip(
                dot,
                f"{label}: position {p['position']}, rate {p['rate']:.3f}"
                + (f" of {p['drafted']:,}" if p.get("drafted") else ""),
            )
    p_ax.set_ylim(0, 1.05)
    p_ax.xaxis.get_major_locator().set_params(integer=True)
    p_ax.set_xlabel("draft position k")
    p_ax.set_ylabel("rate")
    p_ax.set_title("per position", fontsize=10)
    p_ax.legend(fontsize=7.5, frameon=False, loc="lower left")
    by = a.get("by_batch_size") or []
    for i, row in enumerate(by):
        bar = b_ax.bar([i], [row["pooled"]], color=PALETTE[2], width=0.7)[0]
        fig.tip(
            bar,
            f"batch size {row['batch_size']}: accept length {row['pooled']:.3f} over {row['request_steps']:,} request steps",
        )
    b_ax.set_xticks(
        range(len(by)),
        [str(r["batch_size"]) for r in by],
        fontsize=8 if len(by) < 20 else 6,
        rotation=0 if len(by) < 20 else 90,
    )
    b_ax.set_xlim(-0.8, max(len(by), 5) - 0.2)
    b_ax.set_xlabel("batch size")
    b_ax.set_ylabel("accept length (pooled)")
    b_ax.set_title("by batch size", fontsize=10)
    over = a.get("over_run") or []
    o_ax.plot([o["bin"] + 1 for o in over], [o["pooled"] for o in over], "-", color=PALETTE[3], linewidth=1.2)
    for o in over:
        dot = o_ax.plot([o["bin"] + 1], [o["pooled"]], "o", color=PALETTE[3], markersize=5)[0]
        fig.tip(
            dot,
            f"slice {o['bin'] + 1} (cycles {o['first_cycle']}{DASH}{o['last_cycle']}): accept length {o['pooled']:.3f} over {o['request_steps']:,} request steps",
        )
    o_ax.set_xticks([o["bin"] + 1 for o in over])
    o_ax.set_xlabel("slice of the run (consecutive cycles)")
    o_ax.set_ylabel("accept length (pooled)")
    o_ax.set_title(f"over the run (drift {fmt(a.get('drift'), '+.2f')} tokens)", fontsize=10)
    for ax in (h_ax, p_ax, b_ax, o_ax):
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    mean = a.get("mean_accept_length") or {}
    lead = (
        f'<p class="lead">Accept length (tokens per request per verify step, pooled): '
        f'<span class="big">{num(mean.get("pooled"), ".3f", key=S("acceptance", "mean_accept_length", "pooled"), tag="span")}</span>; '
        f"num-steps {esc(a.get('num_steps'))}, from the {esc(a.get('num_steps_source'))}; "
        f"{num(a.get('request_steps'), ',d', key=S('acceptance', 'request_steps'), tag='span')} request steps in "
        f"{num(a.get('cycles_with_acceptance'), ',d', key=S('acceptance', 'cycles_with_acceptance'), tag='span')} of "
        f"{fmt(a.get('decode_cycles'), ',d')} decode cycles. "
        + (
            f"Mean of per-request means: {fmt(mean.get('per_request'), '.3f')}."
            if mean.get("per_request") is not None
            else f"No per-request mean: {esc(mean.get('per_request_note') or '-')}."
        )
        + "</p>"
    )
    rows = [
        f"<td>{k}</td>"
        + num(count, ",d", key=S("acceptance", "histogram", k))
        + f"<td>{100 * count / steps if steps else 0:.1f} %</td>"
        for k, count in enumerate(hist)
    ]
    pos = {p["position"]: p for p in a.get("position_rate") or []}
    cond = {p["position"]: p for p in a.get("conditional_rate") or []}
    prow = [
        f"<td>{k}</td>"
        + num(
            (pos.get(k) or {}).get("rate"),
            ".3f",
            key=S("acceptance", "position_rate", {"position": k}, "rate") if k in pos else None,
        )
        + num(
            (cond.get(k) or {}).get("rate"),
            ".3f",
            key=S("acceptance", "conditional_rate", {"position": k}, "rate") if k in cond else None,
        )
        for k in sorted(set(pos) | set(cond))
    ]
    tables = (
        '<div class="row"><div>'
        + table(["accepted drafts", "request steps", "share"], rows, text_cols=())
        + "</div><div>"
        + table(["position k", "accepted at k", "given k-1 accepted"], prow, text_cols=())
        + "</div></div>"
    )
    return lead + figure(fig.svg()) + tables
