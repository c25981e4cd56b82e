"""report.html of one run: what table.txt, summary.json, trace.json and predict.json say, as
one page a person opens offline (the frame: patchkit.report.html_page; figures: inline SVG from
matplotlib, patchkit.report.svgfig, a tooltip on every mark).

    write_run_page(out_dir, summary_dict, selection)      # build_report does this
    write_run_page_from_folder(run_dir)                   # again, with predict.json (profile.predict)

Sections: the run (the summary's warnings first; series, release, GPU, commands, sampling,
warm-up window, tokens/s, the timer's cost), the decode cycle (a stacked bar of the top-level
phases with their 95 % intervals, for all decode cycles and per batch size: here), the
timeline (html_timeline), acceptance (html_accept), the prediction (html_predict), the trace to
save, and table.txt itself. Every number that summary.json holds is printed from it (html_page's data-k).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from patchkit.report.bootstrap import DASH, UNIT
from patchkit.report.html_accept import acceptance_section
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
from patchkit.report.html_timeline import timeline_section
from patchkit.report.kinds import cycle_kind, decode_kind_of
from patchkit.report.svgfig import PALETTE, UNTIMED, SvgFigure

MAX_BATCH_BARS = 12  # batch sizes drawn as their own bar: the ones with the most cycles


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
        ("run", "the run", "The run", _warnings(s) + _header(s)),
        ("cycle", "decode cycle", "Where a decode cycle's time goes", _cycle(s, selection)),
        ("timeline", "timeline", "Cycles over the run", timeline_section(s, selection)),
    ]
    if s.get("acceptance"):
        sections.append(("acceptance", "acceptance", "Acceptance", acceptance_section(s["acceptance"])))
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


def _warnings(s: dict) -> str:
    """summary.json's warnings (stalls, the timer's cost, a drift), as table.txt prints them."""
    return "".join(f'<p class="warning">{esc(w.get("text"))}</p>' for w in s.get("warnings") or [])


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


def _top_phases(s: dict) -> list[dict]:
    kind = decode_kind_of(s)
    phases = ((s.get("cycle_kinds") or {}).get(kind) or {}).get("phases") or []
    return [p for p in phases if not p.get("depth") and p.get("share_of_cycle") is not None]


def _per_batch(s: dict, selection, names: list[str]) -> list[tuple[str, list[tuple[float, list[float]]]]]:
    """The lead rank's steady timed decode cycles as (cycle ms, [ms of each top-level phase]),
    per batch size, in cycle order (the bootstrap's blocks are consecutive cycles); more than
    MAX_BATCH_BARS sizes go in as many ranges of consecutive sizes."""
    if not selection.procs:
        return []
    lead_i = min(range(len(selection.procs)), key=lambda i: selection.procs[i].rank)
    proc, stalls = selection.procs[lead_i], selection.stall_sets[lead_i]
    field = "dev_ns" if s.get("basis") == "device" else "host_ns"
    kind = decode_kind_of(s)
    parts: dict[int, dict[str, float]] = {}
    for r in proc.phases:
        if r.get("depth") == 0 and r.get("cycle") is not None and r.get(field) is not None:
            slot = parts.setdefault(r["cycle"], {})
            slot[r["name"]] = slot.get(r["name"], 0.0) + r[field] / 1e6
    groups: dict[int, list] = {}
    for c in sorted(proc.cycles, key=lambda c: c["cycle"]):
        if cycle_kind(c) != kind or c["cycle"] in stalls or c.get("timed") is False or c.get("ab") == "off":
            continue
        size = (c.get("attrs") or {}).get("batch_size", c.get("batch_size"))
        if not isinstance(size, int) or c.get(field) is None:
            continue
        p = parts.get(c["cycle"], {})
        groups.setdefault(size, []).append((c["cycle"], c[field] / 1e6, [p.get(n, 0.0) for n in names]))
    sizes = sorted(groups)
    if len(sizes) <= MAX_BATCH_BARS:
        ranges = [[b] for b in sizes]
    else:
        step = len(sizes) / MAX_BATCH_BARS
        ranges = [sizes[round(i * step) : round((i + 1) * step)] for i in range(MAX_BATCH_BARS)]
    out = []
    for r in [r for r in ranges if r]:
        label = f"batch size {r[0]}" if len(sizes) <= MAX_BATCH_BARS else f"batch sizes {r[0]}{DASH}{r[-1]}"
        rows = sorted((row for b in r for row in groups[b]), key=lambda row: row[0])
        out.append((label, [(ms, phase_ms) for _, ms, phase_ms in rows]))
    return out


def _cycle(s: dict, selection) -> str:
    top = _top_phases(s)
    if not top:
        return '<p class="note">No timed decode cycle: nothing to break down.</p>'
    kind = decode_kind_of(s)
    basis = "device" if s.get("basis") == "device" else "host"
    names = [p["name"] for p in top]
    colour = {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(names)}
    ms_key = "per_cycle_dev_ms" if basis == "device" else "per_cycle_host_ms"
    bars = _cycle_bars(s, selection, top, kind, basis, ms_key)
    dc = s["decode_cycle"]
    stalls = (s.get("stalls") or {}).get(kind) or {}
    lead = (
        f'<p class="lead">{num(dc.get("steady_cycles"), ",d", key=S("decode_cycle", "steady_cycles"), tag="span")} steady decode cycles '
        f"({basis} time, every rank), stalls left out ({fmt(stalls.get('count'), ',d')})"
        + (
            ". The first bar is all of them; the others the lead rank's, per batch size"
            if len(bars) > 1
            else ""
        )
        + f". Brackets: the share's 95 % interval (a bootstrap over {UNIT}).</p>"
    )
    return (
        lead
        + figure(_cycle_figure(bars, names, colour, basis))
        + table(
            ["phase", "ms per cycle", "median ms", "share", "95 % interval"],
            _cycle_rows(s, top, colour, kind, ms_key),
        )
    )


def _cycle_bars(s: dict, selection, top: list[dict], kind, basis: str, ms_key: str) -> list[tuple]:
    """The figure's bars: every decode cycle, then the lead rank's per batch size (where it
    saw more than one): label, ms per phase, cycle ms, shares, their intervals, cycles."""
    from patchkit.report.bootstrap import consecutive_blocks, ratio_intervals

    names = [p["name"] for p in top]
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
        units = consecutive_blocks([[*parts, t] for t, parts in group])  # as the first bar's
        cis = ratio_intervals(units, [(i, len(names)) for i in range(len(names))])
        shares = [100.0 * m / total if total else None for m in means]
        bars.append((label, means, total, shares, cis, n))
    return bars


def _cycle_figure(bars: list[tuple], names: list[str], colour: dict, basis: str) -> str:
    """The bars as stacked horizontal segments per top-level phase, the untimed rest after them."""
    from matplotlib.patches import Patch

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
    return fig.svg()


def _cycle_rows(s: dict, top: list[dict], colour: dict, kind, ms_key: str) -> list[str]:
    """The table's rows: each top-level phase's ms per cycle, median, share and interval, then
    the top-level phases together."""
    share_key = "share_of_cycle"
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
    return table_rows
