"""The terminal table: one line per phase (nested by indentation), then summary lines.

Each share is followed by its 95 % interval (low and high in brackets, joined by an en dash;
percent of the cycle: a bootstrap over blocks of consecutive timed cycles, see
patchkit.report.summarize), and a note under the table says when there are too few timed
cycles to read every share to within 2 points."""

from __future__ import annotations

from patchkit.report.acceptance import acceptance_lines, prediction_lines
from patchkit.report.bootstrap import BLOCKS, DASH, LEVEL, RESAMPLES, SEED, UNIT
from patchkit.report.counts import counts_line
from patchkit.report.drift import drift_line
from patchkit.report.kinds import NO_KIND
from patchkit.report.summarize import P99_MIN_N, Summary


def _ms(dist: dict | None, key: str) -> str:
    """Milliseconds, one format for every cell of a time column (3 decimals: microseconds)."""
    if not dist or dist.get(key) is None:
        if dist and key == "p99" and dist.get("n", 0) < P99_MIN_N:
            return f"n<{P99_MIN_N}"
        return "-"
    return f"{dist[key]:.3f}"


def _gated(dist: dict | None) -> dict | None:
    """A distribution with its p99 dropped below P99_MIN_N values."""
    if dist and dist.get("n", 0) < P99_MIN_N:
        return {**dist, "p99": None}
    return dist


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _ci(interval) -> str:
    """A share's interval, in the share's format (one decimal, percent of the cycle)."""
    return "-" if interval is None else f"[{interval[0]:.1f}{DASH}{interval[1]:.1f}]"


def _num(value, fmt="{:.1f}") -> str:
    return "-" if value is None else fmt.format(value)


HEAD = (
    "phase",
    "count",
    "dev mean",
    "dev p50",
    "dev p99",
    "host mean",
    "host p50",
    "host p99",
    "share",
    "95% interval",
)


def _time_columns(dev, host) -> tuple:
    """mean, p50 and p99 of the device time, then of the host time."""
    return tuple(_ms(stats, key) for stats in (dev, host) for key in ("mean", "p50", "p99"))


def _rows(label: str, cycle: dict, phases: list[dict]) -> list[tuple]:
    dev, host = _gated(cycle["dev_ms"]), _gated(cycle["host_ms"])
    rows = [(label, str(cycle["count"]), *_time_columns(dev, host), "100.0%" if cycle["count"] else "-", "")]
    for e in phases:
        name = "  " * (e["depth"] + 1) + e["name"]
        if e["graph"]:
            name += " [graph]"
        if e["captured"]:
            name += " [in graph]"
        dev = e.get("per_cycle_dev_ms")
        host = e.get("per_cycle_host_ms")
        rows.append(
            (
                name,
                str(e["count"]),
                *_time_columns(dev, host),
                _pct(e["share_of_cycle"]),
                _ci(e.get("share_ci95")),
            )
        )
    return rows


def _grid(sections: list[tuple]) -> list[str]:
    """Sections (a title line or None, rows, and optionally lines under the rows) in one set
    of aligned columns."""
    every = [r for section in sections for r in section[1]] + [HEAD]
    widths = [max(len(r[i]) for r in every) for i in range(len(HEAD))]
    fmt = "  ".join(["{:<%d}" % widths[0]] + ["{:>%d}" % w for w in widths[1:]])
    lines = [fmt.format(*HEAD), "  ".join("-" * w for w in widths)]
    for title, rows, *under in sections:
        if title is not None:
            lines.append(title)
        lines.extend(fmt.format(*r) for r in rows)
        for extra in under:
            lines.extend(extra)
    return lines


def _duration(ms: float) -> str:
    return f"{ms / 1000:.2f} s" if ms >= 1000 else f"{ms:.1f} ms"


def _listed(values: list, most: int = 8) -> str:
    shown = ", ".join(str(v) for v in values[:most])
    return shown + (", …" if len(values) > most else "")


def stall_line(kind: str, st: dict | None) -> str:
    """One line on the stalls of one kind of cycle."""
    cycles = "cycles" if kind == NO_KIND else f"{kind} cycles"
    if not st:
        return f"no stalls in {cycles}"
    median = "" if st.get("median_ms") is None else f", median {st['median_ms']:.3f} ms"
    rule = f"rule: {st['rule']}{median}"
    n = st["count"]
    if not n:
        return f"no stalls in {cycles} ({rule})"
    kind = "cycle" if kind == NO_KIND else kind
    main = st["main_phase_counts"]
    where = ", ".join(name if len(main) == 1 else f"{name} ({count})" for name, count in main.items())
    line = (
        f"{n} stall{'s' if n != 1 else ''}, {_duration(st['total_ms'])} "
        f"({_pct(st['share_of_kind_time'])} of {kind} time), in {where}"
    )
    firsts = [c["batch_size"] for c in st["cycles"] if c["first_at_batch_size"]]
    others = [c for c in st["cycles"] if not c["first_at_batch_size"]]
    if firsts:
        line += f", first cycle at batch size{'s' if len(firsts) != 1 else ''} {_listed(firsts)}"
    if others:
        sizes = [c["batch_size"] for c in others if c["batch_size"] is not None]
        line += f"; {len(others)} not the first at {'their' if len(others) != 1 else 'its'} batch size" + (
            f" ({_listed(sizes)})" if sizes else ""
        )
    return line + f"; not in the shares ({rule})"


def ci_note(share_ci: dict | None, on: str = "") -> str | None:
    """The note when some share's interval is wider than +-2 points: how many timed cycles
    there were and about how many would read every share to within 2 points."""
    if not share_ci or not share_ci.get("cycles_for_target"):
        return None
    widest = share_ci["widest"]
    name = widest["name"] if widest["name"] == "top-level phases" else f"{widest['name']}'s"
    need = share_ci["cycles_for_target"]
    need = int(float(f"{need:.2g}")) if need >= 100 else need  # "about": two figures
    return (
        f"note: {share_ci['timed_cycles']} timed{on} cycles are too few to read every share to "
        f"within {share_ci['target_points']:.0f} points (widest interval: {name}, "
        f"±{widest['half_width']:.1f}); about {need} would do (the half-width shrinks as "
        f"1/sqrt(cycles))"
    )


def _window_line(summary: Summary) -> str:
    win = summary.window
    if win is None:
        return "measured window: none (no window.json); every cycle is in the report"
    source = f" from {win['source']}" if win.get("source") else ""
    line = (
        f"measured window{source}: {summary.cycle['count']} cycles inside; "
        f"{summary.warmup_cycles} warm-up cycles before it and "
        f"{summary.after_window_cycles} after it left out"
    )
    if not summary.cycle["count"] and summary.warmup_cycles + summary.after_window_cycles:
        line += (
            "\nnote: no cycle started inside the measured window: was it recorded on "
            "another host than the timed processes (their clocks place the cycles)?"
        )
    return line


def _rate(p: float | None) -> str:
    """A timed probability as "1/16" where it is one over a whole number, else "0.3"."""
    if p is None:
        return "?"
    if p > 0 and abs(1 / p - round(1 / p)) < 1e-9:
        return "1" if round(1 / p) == 1 else f"1/{round(1 / p)}"
    return f"{p:g}"


def _budget_line(sampling: dict, budget: dict) -> str:
    """PATCHKIT_TIMER_BUDGET: the budget, the timed fraction and rates, the measured cost."""
    how = ", ".join(
        str(x)
        for x in (
            budget.get("controller"),
            sampling.get("method"),
            None if sampling.get("seed") is None else f"seed {sampling['seed']}",
        )
        if x
    )
    frac = budget.get("timed_fraction")
    lo, hi = budget.get("p_min"), budget.get("p_max")
    rates = f"p {_rate(lo)}" if lo == hi else f"p {_rate(lo)}..{_rate(hi)}"
    changes = budget.get("changes") or 0
    line = (
        f"timing budget {budget.get('pct'):g}% of the cycle period ({how}): "
        f"{sampling['timed_cycles']} of {sampling['cycles']} cycles timed"
        + (
            ""
            if frac is None
            else f" ({100 * frac:.1f}%, {rates}, {changes} change{'s' if changes != 1 else ''})"
        )
    )
    cost, period, spent = budget.get("cost_us"), budget.get("period_ms"), budget.get("spent_pct")
    if cost is None:
        line += "; timer cost not measured yet"
    else:
        host, visible = budget.get("host_cost_us"), budget.get("visible_us")
        if visible is not None and host is not None and visible < host:
            line += f"; timer {host:.0f} µs host time per timed cycle, at most {visible:.0f} µs of it in the period"
        else:
            line += f"; timer {cost:.0f} µs per timed cycle"
        if period:
            line += f", cycle period {period:.2f} ms"
        if spent is not None:
            line += f": ~{spent:.2f}% of the period spent"
    if budget.get("weighted"):
        line += "; shares weigh each timed cycle by 1/p"
    return line


# what the budget line means, under it (docs/runtime.md, "Timing that spends a budget")
BUDGET_NOTE = (
    "  (the budget: the runtime times as many cycles as keep its own measured cost within "
    'PATCHKIT_TIMER_BUDGET % of the cycle period; "% of the period spent" = the timed fraction x the '
    "cost per timed cycle / the period: about how much timing slowed this run)"
)


def _sampling_line(sampling: dict) -> str:
    if sampling.get("budget"):
        return _budget_line(sampling, sampling["budget"])
    how = ", ".join(
        str(x)
        for x in (
            sampling.get("method"),
            None if sampling.get("seed") is None else f"seed {sampling['seed']}",
        )
        if x
    )
    every = sampling.get("every")
    head = (
        f"sampled timing (1 cycle in {every}" + (f", {how}" if how else "") + ")"
        if every
        else "sampled timing"
    )
    return (
        f"{head}: {sampling['timed_cycles']} of {sampling['cycles']} cycles timed; shares "
        f"and phase statistics from the timed cycles, counts are calls timed"
    )


def _skew_lines(skew: dict) -> list[str]:
    on = f" of {skew['kind']} cycles" if skew.get("kind") else ""
    lines = [
        f"rank skew{on} ({skew['basis']} time, mean per call in ms; "
        f"! = spread > {skew['threshold_pct']:.0f}% of the mean):"
    ]
    for row in skew["phases"]:
        per_rank = " ".join(f"r{r} {v:.3f}" for r, v in row["per_rank_mean_ms"].items())
        mark = "!" if row["flagged"] else " "
        name = "  " * (row["depth"] + 1) + row["name"]
        lines.append(
            f" {mark} {name}: {per_rank}; spread {row['skew_ms']:.3f} "
            f"({_pct(row['skew_pct'])}), slowest r{row['slowest_rank']}"
        )
    return lines


def _overhead_line(ov: dict) -> str:
    if not ov["pairs"]:
        return (
            f"timer overhead (PATCHKIT_TIMER_AB={ov['ab_cycles']}): no complete pair of timed and off blocks"
        )
    lo, hi = ov["iqr_pct"]
    return (
        f"timer overhead (PATCHKIT_TIMER_AB={ov['ab_cycles']}, {ov['pairs']} timed blocks against "
        "the off blocks on both sides, "
        f"{ov['kind'] or 'all'} cycles): median {ov['median_pct']:+.2f}% of the cycle "
        f"period (IQR {lo:+.2f}% .. {hi:+.2f}%; {ov['timed_period_ms']:.3f} ms timed vs "
        f"{ov['off_period_ms']:.3f} ms off)"
        + (
            "; off blocks bare: cycle starts only, so recording a cycle counts too"
            if ov.get("off_blocks") == "bare"
            else ""
        )
    )


# why a run has no device times, by timer mode (PATCHKIT_TIMER)
MODE_WHY = {
    "host": "host time only, as on a machine without a CUDA device or with PATCHKIT_TIMER=host",
    "off": "the timer was off",
}


def _no_device_times(summary: Summary) -> bool:
    kinds = list(summary.cycle_kinds.values()) or [{"cycle": summary.cycle, "phases": summary.phases}]
    return all(
        part["cycle"].get("dev_ms") is None and all(e.get("dev_ms") is None for e in part["phases"])
        for part in kinds
    )


# meta keys shown by other lines of the table
META_SHOWN = {
    "tokens_per_s",
    "baseline_tokens_per_s",
    "accept_length",
    "tokens_per_s_runs",
    "baseline_tokens_per_s_runs",
}
# summary.json's meta keys are snake_case (machine-friendly); the table says them in words
META_LABELS = {
    "workload": "workload",
    "benchmark": "benchmark",
    "benchmark_command": "benchmark command",
    "server_command": "server command",
    "baseline_server_command": "baseline server command",
    "server_environment": "server environment",
    "worker": "speculative worker (server log)",
    "sweep_point": "sweep point",
    "targets": "targets",
    "series": "series",
    "partial": "partial",
}


def meta_lines(meta: dict) -> list[str]:
    """The report's meta as lines ``label: value`` (META_LABELS; a few keys fold into one
    line); keys other lines show (META_SHOWN) are left out."""
    lines = []
    for key, value in meta.items():
        if key in META_SHOWN or key in ("prompts", "torch_version", "warmup_command"):
            continue
        if key == "identical_outputs":
            of = f"/{meta['prompts']} prompts" if meta.get("prompts") is not None else " prompts"
            lines.append(f"identical outputs (greedy, with vs without assistant): {value}{of}")
        elif key == "transformers_version":
            torch = f", torch {meta['torch_version']}" if meta.get("torch_version") else ""
            lines.append(f"upstream: transformers {value}{torch}")
        elif key == "warmup" and isinstance(value, bool):
            what = f" ({meta['warmup_command']})" if meta.get("warmup_command") else ""
            lines.append(
                f"warm-up: on{what}, before the measured pass (its cycles lie outside the measured window)"
                if value
                else "warm-up: off (--no-warmup)"
            )
        elif key == "wall_time_s" and isinstance(value, (int, float)):
            lines.append(f"profile run wall time: {value:.1f} s")
        else:
            lines.append(f"{META_LABELS.get(key, key.replace('_', ' '))}: {value}")
    return lines


def time_split_lines(split: dict | None) -> list[str]:
    """One line: the measured window's time in decode and in prefill cycles."""
    if not split:
        return []
    parts = [
        f"{name} {p['cycles']} x {p['period_mean_ms']:.2f} ms = {p['total_s']:.2f} s"
        for name, p in split.items()
        if p["cycles"]
    ]
    return ["time in cycles (start to start, lead rank; the cycles with a period): " + ", ".join(parts)]


def render_table(summary: Summary) -> str:
    """The report as text (times in ms; share = % of the cycle's time on `summary.basis`).

    With several kinds of cycle, one section per kind (decode first, then prefill), each
    share a percentage of that kind's cycle time."""
    n_ranks = len({r["rank"] for r in summary.ranks})
    lines = [
        f"patchkit timing: {n_ranks} rank(s), {len(summary.ranks)} process(es), "
        f"mode {summary.mode}, {summary.cycle['count']} cycles recorded; times in ms, "
        f"share = % of cycle {summary.basis} time",
    ]
    lines.extend(_grid(_sections(summary)))
    lines.extend(_legend_lines(summary))
    lines.append("")
    lines.extend(_coverage_lines(summary, n_ranks))
    lines.extend(_throughput_lines(summary.throughput))
    if summary.baseline and summary.baseline.get("error"):
        lines.append(f"baseline (no speculation): failed: {summary.baseline['error']}")
    lines.extend(_decode_lines(summary))
    lines.extend(acceptance_lines(summary.acceptance))
    lines.extend(prediction_lines(summary.prediction))
    lines.extend(time_split_lines(summary.time_split))
    lines.extend(meta_lines(summary.meta))
    lines.extend(_note_lines(summary))
    return "\n".join(lines) + "\n"


def _drift_lines(summary: Summary, kind: str | None) -> list[str]:
    """The drift line, under the section of the kind it tested (patchkit.report.drift)."""
    drift = summary.drift or {}
    line = drift_line(drift) if kind is not None and drift.get("kind") == kind else None
    return [line] if line else []


def _sections(summary: Summary) -> list[tuple[str | None, list[tuple], list[str]]]:
    """The grid's sections: one per kind of cycle where there are several (its title, rows
    and notes), else one untitled."""
    kinds = summary.cycle_kinds
    stalls = summary.stalls or {}
    if len(kinds) > 1:
        return [
            (
                f"{kind} ({part['cycles']} cycles; shares of {kind} cycle time)",
                _rows(f"{kind} cycle", part["cycle"], part["phases"]),
                [stall_line(kind, stalls.get(kind))]
                + _drift_lines(summary, kind)
                + [n for n in [ci_note(part.get("share_ci"), f" {kind}")] if n],
            )
            for kind, part in kinds.items()
        ]
    kind = next(iter(kinds), None)
    label = "cycle" if kind is None or kind == "unspecified" else f"{kind} cycle"
    return [
        (
            None,
            _rows(label, summary.cycle, summary.phases),
            ([stall_line(kind, stalls.get(kind))] if kind else [])
            + _drift_lines(summary, kind)
            + [n for n in [ci_note(summary.share_ci)] if n],
        )
    ]


def _legend_lines(summary: Summary) -> list[str]:
    """What the grid's columns mean, the measured window, the cycle counts, and why device
    times or sampled cycles are missing."""
    steady = summary.cycle.get("steady", summary.cycle["count"])
    lines = [
        f"times: ms per cycle over the steady-state cycles ({steady}: timed, not "
        f"stalls), a phase's calls summed within each cycle, all phases over the same "
        f"cycles",
        f"share = mean phase / mean cycle (the share uses the mean; p50 is the "
        f"median); count = calls timed (cycle row: every cycle); p99 only over "
        f">= {P99_MIN_N} cycles",
        f"[low{DASH}high] = the share's {LEVEL:.0f}% interval: a bootstrap over {UNIT} "
        f"({BLOCKS} blocks resampled, {RESAMPLES} times, seed {SEED})",
        _window_line(summary),
    ]
    counted = counts_line(summary.cycle_counts)
    if counted:
        lines.append(counted)
    if _no_device_times(summary):
        lines.append(
            f"dev = device (CUDA) time: none in this run, so the dev columns show - (mode "
            f"{summary.mode}: {MODE_WHY.get(summary.mode, 'no device records')})"
        )
    if summary.sampling:
        lines.append(_sampling_line(summary.sampling))
        if summary.sampling.get("budget"):
            lines.append(BUDGET_NOTE)
    return lines


def _coverage_lines(summary: Summary, n_ranks: int) -> list[str]:
    """Phases outside cycles, how much of the cycle the top-level phases cover, the ranks'
    mean cycles and skew, and the timer's own overhead."""
    lines = []
    kinds = summary.cycle_kinds
    if summary.outside_cycles:
        names = ", ".join(f"{name} {n}" for name, n in summary.outside_cycles.items())
        lines.append(f"outside any cycle (warm-up; not in the shares): {names}")
    if len(kinds) > 1:
        for kind, part in kinds.items():
            if part["top_level_share"] is not None:
                lines.append(
                    f"top-level phases cover {part['top_level_share']:.1f}% "
                    f"{_ci(part.get('top_level_share_ci95'))} of the "
                    f"{kind} cycle ({summary.basis} time)"
                )
    elif summary.top_level_share is not None:
        lines.append(
            f"top-level phases cover {summary.top_level_share:.1f}% {_ci(summary.top_level_share_ci95)} "
            f"of the cycle ({summary.basis} time)"
        )
    dc = summary.decode_cycle
    if dc and dc["top_level_share"] is not None and dc["count"] < summary.cycle["count"]:
        lines.append(
            f"decode cycles only ({dc['count']}): top-level phases cover "
            f"{dc['top_level_share']:.1f}% {_ci(dc.get('top_level_share_ci95'))} ({dc['basis']} time)"
        )
    if n_ranks > 1:
        per_rank = ", ".join(
            f"r{r['rank']} {_ms(r['cycle_dev_ms'] or r['cycle_host_ms'], 'mean')}" for r in summary.ranks
        )
        lines.append(f"mean cycle per rank (ms): {per_rank}")
    if summary.rank_skew:
        lines.extend(_skew_lines(summary.rank_skew))
    if summary.overhead:
        lines.append(_overhead_line(summary.overhead))
    return lines


def _throughput_lines(tp: dict) -> list[str]:
    """Tokens/s with and without speculation, their speedup, and their spread over runs."""
    lines = []
    if tp["tokens_per_s"] is not None or tp["baseline_tokens_per_s"] is not None:
        line = (
            f"tokens/s with speculation: {_num(tp['tokens_per_s'])}, "
            f"without: {_num(tp['baseline_tokens_per_s'])}"
        )
        if tp["speedup"] is not None:
            line += f", speedup {tp['speedup']:.2f}x"
        lines.append(line)
    for prefix, label in (("", "with speculation"), ("baseline_", "without speculation")):
        runs = tp.get(f"{prefix}tokens_per_s_runs")
        if runs:
            lo, hi = tp[f"{prefix}tokens_per_s_range"]
            lines.append(
                f"tokens/s {label} over {len(runs)} run(s): median "
                f"{tp[f'{prefix}tokens_per_s_median']:.1f}, range {lo:.1f} .. {hi:.1f}"
            )
    return lines


def _decode_lines(summary: Summary) -> list[str]:
    """The mean accepted length (the benchmark's, else pooled over the cycles) and batch size."""
    lines = []
    dec = summary.decode
    accept = dec.get("accept_length_reported", dec["accept_length_mean"])
    if accept is not None:
        line = f"mean accepted length: {accept:.2f} tokens per request per verify step"
        if "accept_length_reported" in dec:
            line += " (the benchmark's figure)"
        else:
            carried = (summary.cycle_counts or {}).get("with_acceptance")
            line += f", pooled over the {carried} cycles that carry acceptance" if carried else ""
        if dec["accepted_drafts_mean"] is not None:
            line += f" ({dec['accepted_drafts_mean']:.2f} accepted draft tokens)"
        lines.append(line)
    if dec["batch_size_mean"] is not None:
        lines.append(f"mean batch size: {dec['batch_size_mean']:.2f}")
    return lines


def _note_lines(summary: Summary) -> list[str]:
    """The closing notes: cycles without device times, the summary's warnings, lost
    records, duplicate files, and processes that dropped records or ended uncleanly."""
    lines = []
    if summary.unresolved:
        lines.append(
            f"note: {summary.unresolved} cycle(s) without device times (the process "
            f"ended before the GPU reached them); not in the device shares"
        )
    lines.extend(w["text"] for w in summary.warnings)
    if summary.lost_records:
        lines.append(f"note: {summary.lost_records} record(s) lost (cut lines, dropped device records)")
    for r in summary.ranks:
        if r.get("duplicate_files"):
            lines.append(
                f"note: {', '.join(r['duplicate_files'])}: a copy of {r['file']} "
                "(the same process's header), read once"
            )
    dropped = [
        r
        for r in summary.ranks
        if r["stats"] and (r["stats"].get("dropped_pending") or r["stats"].get("abandoned"))
    ]
    for r in dropped:
        lines.append(
            f"note: rank {r['rank']} pid {r['pid']}: abandoned {r['stats']['abandoned']}, "
            f"dropped {r['stats']['dropped_pending']} records"
        )
    unclean = [r for r in summary.ranks if not r["ended_cleanly"]]
    for r in unclean:
        lines.append(
            f"note: rank {r['rank']} pid {r['pid']} ended without its exit record "
            f"(killed?); its completed cycles are all here"
        )
    return lines
