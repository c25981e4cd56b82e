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


def render_table(summary: Summary) -> str:
    """The report as text (times in ms; share = % of the cycle's time on `summary.basis`)."""
    n_ranks = len({r["rank"] for r in summary.ranks})
    lines = [
        f"patchkit timing: {n_ranks} rank(s), {len(summary.ranks)} process(es), "
        f"mode {summary.mode}, {summary.cycle['count']} cycles; times in ms, "
        f"share = % of cycle {summary.basis} time",
    ]
    head = ("phase", "count", "dev mean", "dev p50", "dev p99",
            "host mean", "host p50", "host p99", "share")
    rows = []
    cyc = summary.cycle
    rows.append(("cycle", str(cyc["count"]), _ms(cyc["dev_ms"], "mean"), _ms(cyc["dev_ms"], "p50"),
                 _ms(cyc["dev_ms"], "p99"), _ms(cyc["host_ms"], "mean"),
                 _ms(cyc["host_ms"], "p50"), _ms(cyc["host_ms"], "p99"),
                 "100.0%" if cyc["count"] else "-"))
    for e in summary.phases:
        label = "  " * (e["depth"] + 1) + e["name"]
        if e["graph"]:
            label += " [graph]"
        if e["captured"]:
            label += " [in graph]"
        rows.append((label, str(e["count"]), _ms(e["dev_ms"], "mean"), _ms(e["dev_ms"], "p50"),
                     _ms(e["dev_ms"], "p99"), _ms(e["host_ms"], "mean"), _ms(e["host_ms"], "p50"),
                     _ms(e["host_ms"], "p99"), _pct(e["share_of_cycle"])))
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    fmt = "  ".join(["{:<%d}" % widths[0]] + ["{:>%d}" % w for w in widths[1:]])
    lines.append(fmt.format(*head))
    lines.append("  ".join("-" * w for w in widths))
    lines.extend(fmt.format(*r) for r in rows)
    lines.append("")
    if summary.top_level_share is not None:
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
    dropped = [r for r in summary.ranks if r["stats"] and (r["stats"].get("dropped_pending")
                                                          or r["stats"].get("abandoned"))]
    for r in dropped:
        lines.append(f"note: rank {r['rank']} pid {r['pid']}: abandoned {r['stats']['abandoned']}, "
                     f"dropped {r['stats']['dropped_pending']} records")
    return "\n".join(lines) + "\n"
