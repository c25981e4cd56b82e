"""The terminal table: one line per phase (nested by indentation), then summary lines."""

from __future__ import annotations

from patchkit.report.summarize import Summary


def _ms(dist: dict | None, key: str) -> str:
    if not dist or dist.get(key) is None:
        return "-"
    value = dist[key]
    return f"{value:.3f}" if value < 100 else f"{value:.1f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _num(value, fmt="{:.1f}") -> str:
    return "-" if value is None else fmt.format(value)


HEAD = ("phase", "count", "dev mean", "dev p50", "dev p99",
        "host mean", "host p50", "host p99", "share")


def _rows(label: str, cycle: dict, phases: list[dict]) -> list[tuple]:
    rows = [(label, str(cycle["count"]), _ms(cycle["dev_ms"], "mean"),
             _ms(cycle["dev_ms"], "p50"), _ms(cycle["dev_ms"], "p99"),
             _ms(cycle["host_ms"], "mean"), _ms(cycle["host_ms"], "p50"),
             _ms(cycle["host_ms"], "p99"), "100.0%" if cycle["count"] else "-")]
    for e in phases:
        name = "  " * (e["depth"] + 1) + e["name"]
        if e["graph"]:
            name += " [graph]"
        if e["captured"]:
            name += " [in graph]"
        rows.append((name, str(e["count"]), _ms(e["dev_ms"], "mean"), _ms(e["dev_ms"], "p50"),
                     _ms(e["dev_ms"], "p99"), _ms(e["host_ms"], "mean"), _ms(e["host_ms"], "p50"),
                     _ms(e["host_ms"], "p99"), _pct(e["share_of_cycle"])))
    return rows


def _grid(sections: list[tuple[str | None, list[tuple]]]) -> list[str]:
    """Sections (a title line or None, then rows) in one set of aligned columns."""
    every = [r for _, rows in sections for r in rows] + [HEAD]
    widths = [max(len(r[i]) for r in every) for i in range(len(HEAD))]
    fmt = "  ".join(["{:<%d}" % widths[0]] + ["{:>%d}" % w for w in widths[1:]])
    lines = [fmt.format(*HEAD), "  ".join("-" * w for w in widths)]
    for title, rows in sections:
        if title is not None:
            lines.append(title)
        lines.extend(fmt.format(*r) for r in rows)
    return lines


def _skew_lines(skew: dict) -> list[str]:
    on = f" of {skew['kind']} cycles" if skew.get("kind") else ""
    lines = [f"rank skew{on} ({skew['basis']} time, mean per call in ms; "
             f"! = spread > {skew['threshold_pct']:.0f}% of the mean):"]
    for row in skew["phases"]:
        per_rank = " ".join(f"r{r} {v:.3f}" for r, v in row["per_rank_mean_ms"].items())
        mark = "!" if row["flagged"] else " "
        name = "  " * (row["depth"] + 1) + row["name"]
        lines.append(f" {mark} {name}: {per_rank}; spread {row['skew_ms']:.3f} "
                     f"({_pct(row['skew_pct'])}), slowest r{row['slowest_rank']}")
    return lines


def _overhead_line(ov: dict) -> str:
    if not ov["pairs"]:
        return (f"timer overhead (PATCHKIT_TIMER_AB={ov['ab_cycles']}): no complete pair of "
                f"timed and off blocks")
    lo, hi = ov["iqr_pct"]
    return (f"timer overhead (PATCHKIT_TIMER_AB={ov['ab_cycles']}, {ov['pairs']} block pairs, "
            f"{ov['kind'] or 'all'} cycles): median {ov['median_pct']:+.2f}% of the cycle "
            f"period (IQR {lo:+.2f}% .. {hi:+.2f}%; {ov['timed_period_ms']:.3f} ms timed vs "
            f"{ov['off_period_ms']:.3f} ms off)")


def render_table(summary: Summary) -> str:
    """The report as text (times in ms; share = % of the cycle's time on `summary.basis`).

    With several kinds of cycle, one section per kind (decode first, then prefill), each
    share a percentage of that kind's cycle time."""
    n_ranks = len({r["rank"] for r in summary.ranks})
    lines = [
        f"patchkit timing: {n_ranks} rank(s), {len(summary.ranks)} process(es), "
        f"mode {summary.mode}, {summary.cycle['count']} cycles; times in ms, "
        f"share = % of cycle {summary.basis} time",
    ]
    kinds = summary.cycle_kinds
    if len(kinds) > 1:
        sections = [(f"{kind} ({part['cycles']} cycles; shares of {kind} cycle time)",
                     _rows(f"{kind} cycle", part["cycle"], part["phases"]))
                    for kind, part in kinds.items()]
    else:
        label = "cycle" if not kinds or next(iter(kinds)) == "unspecified" \
            else f"{next(iter(kinds))} cycle"
        sections = [(None, _rows(label, summary.cycle, summary.phases))]
    lines.extend(_grid(sections))
    lines.append("")
    if summary.outside_cycles:
        names = ", ".join(f"{name} {n}" for name, n in summary.outside_cycles.items())
        lines.append(f"outside any cycle (warm-up; not in the shares): {names}")
    if len(kinds) > 1:
        for kind, part in kinds.items():
            if part["top_level_share"] is not None:
                lines.append(f"top-level phases cover {part['top_level_share']:.1f}% of the "
                             f"{kind} cycle ({summary.basis} time)")
    elif summary.top_level_share is not None:
        lines.append(f"top-level phases cover {summary.top_level_share:.1f}% of the cycle "
                     f"({summary.basis} time)")
    dc = summary.decode_cycle
    if dc and dc["top_level_share"] is not None and dc["count"] < summary.cycle["count"]:
        lines.append(f"decode cycles only ({dc['count']}): top-level phases cover "
                     f"{dc['top_level_share']:.1f}% ({dc['basis']} time)")
    if n_ranks > 1:
        per_rank = ", ".join(f"r{r['rank']} {_ms(r['cycle_dev_ms'] or r['cycle_host_ms'], 'mean')}"
                             for r in summary.ranks)
        lines.append(f"mean cycle per rank (ms): {per_rank}")
    if summary.rank_skew:
        lines.extend(_skew_lines(summary.rank_skew))
    if summary.overhead:
        lines.append(_overhead_line(summary.overhead))
    tp = summary.throughput
    if tp["tokens_per_s"] is not None or tp["baseline_tokens_per_s"] is not None:
        line = (f"tokens/s with speculation: {_num(tp['tokens_per_s'])}, "
                f"without: {_num(tp['baseline_tokens_per_s'])}")
        if tp["speedup"] is not None:
            line += f", speedup {tp['speedup']:.2f}x"
        lines.append(line)
    if summary.baseline and summary.baseline.get("error"):
        lines.append(f"baseline (no speculation): failed: {summary.baseline['error']}")
    dec = summary.decode
    accept = dec.get("accept_length_reported", dec["accept_length_mean"])
    if accept is not None:
        line = f"mean accepted length: {accept:.2f} tokens per request per cycle"
        if dec["accepted_drafts_mean"] is not None:
            line += f" ({dec['accepted_drafts_mean']:.2f} accepted draft tokens)"
        lines.append(line)
    if dec["batch_size_mean"] is not None:
        lines.append(f"mean batch size: {dec['batch_size_mean']:.2f}")
    known = {"tokens_per_s", "baseline_tokens_per_s", "accept_length"}
    for key, value in summary.meta.items():
        if key not in known:
            lines.append(f"{key}: {value}")
    if summary.unresolved:
        lines.append(f"note: {summary.unresolved} cycle(s) without device times (the process "
                     f"ended before the GPU reached them); not in the device shares")
    if summary.lost_records:
        lines.append(f"note: {summary.lost_records} record(s) lost (cut lines, dropped "
                     f"device records)")
    dropped = [r for r in summary.ranks if r["stats"] and (r["stats"].get("dropped_pending")
                                                          or r["stats"].get("abandoned"))]
    for r in dropped:
        lines.append(f"note: rank {r['rank']} pid {r['pid']}: abandoned {r['stats']['abandoned']}, "
                     f"dropped {r['stats']['dropped_pending']} records")
    unclean = [r for r in summary.ranks if not r["ended_cleanly"]]
    for r in unclean:
        lines.append(f"note: rank {r['rank']} pid {r['pid']} ended without its exit record "
                     f"(killed?); its completed cycles are all here")
    return "\n".join(lines) + "\n"
