"""phases.png: where each cycle's time goes, over the run and per rank; sweep.png: tokens/s and
phase shares per sweep point (matplotlib, Agg).

Only cycles of the kind the report describes first (decode when there is one) are
stacked; cycles of other kinds (prefill) are marked where they ran, as ticks along the
top, so that a few long prefills neither dominate the bars nor enter the decode shares.
"""

from __future__ import annotations

from pathlib import Path

from patchkit.report.kinds import cycle_kind
from patchkit.report.load import ProcessTiming

MAX_BINS = 200


def _top_level_per_cycle(proc: ProcessTiming, basis: str, names: list[str], kind=None,
                         others: list | None = None):
    """For each cycle of `kind` (in order): its time and the time of each top-level phase,
    in ms. Cycles of other kinds append, to `others`, the row index they came before."""
    field = "dev_ns" if basis == "device" else "host_ns"
    by_cycle: dict[int, dict[str, float]] = {}
    for r in proc.phases:
        if r.get("depth") == 0 and r.get("cycle") is not None and r.get(field) is not None:
            slot = by_cycle.setdefault(r["cycle"], {})
            slot[r["name"]] = slot.get(r["name"], 0.0) + r[field] / 1e6
    rows = []
    for c in sorted(proc.timed_cycles, key=lambda c: c["cycle"]):
        if c.get(field) is None:
            continue
        if kind is not None and cycle_kind(c) != kind:
            if others is not None:
                others.append(len(rows))
            continue
        parts = by_cycle.get(c["cycle"], {})
        rows.append((c[field] / 1e6, [parts.get(n, 0.0) for n in names]))
    return rows


def _binned(rows, bins):
    if len(rows) <= bins:
        return rows
    size = len(rows) / bins
    out = []
    for b in range(bins):
        chunk = rows[int(b * size): int((b + 1) * size)] or rows[-1:]
        total = sum(r[0] for r in chunk) / len(chunk)
        parts = [sum(r[1][i] for r in chunk) / len(chunk) for i in range(len(chunk[0][1]))]
        out.append((total, parts))
    return out


def write_chart(procs: list[ProcessTiming], summary, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    basis = summary.basis
    kind = summary.primary_kind if len(summary.cycle_kinds) > 1 else None
    phases = summary.cycle_kinds[kind]["phases"] if kind else summary.phases
    names = [e["name"] for e in phases if e["depth"] == 0 and e["per_cycle"]]
    names = list(dict.fromkeys(names))
    colors = plt.get_cmap("tab20").colors
    fig, (ax_run, ax_rank) = plt.subplots(1, 2, figsize=(13, 5),
                                          gridspec_kw={"width_ratios": [3, 1]})
    lead = procs[0]
    others: list[int] = []
    all_rows = _top_level_per_cycle(lead, basis, names, kind, others)
    rows = _binned(all_rows, MAX_BINS)
    xs = list(range(len(rows)))
    bottom = [0.0] * len(rows)
    for i, name in enumerate(names):
        vals = [r[1][i] for r in rows]
        ax_run.bar(xs, vals, bottom=bottom, width=1.0, color=colors[i % len(colors)], label=name)
        bottom = [b + v for b, v in zip(bottom, vals)]
    rest = [max(r[0] - b, 0.0) for r, b in zip(rows, bottom)]
    ax_run.bar(xs, rest, bottom=bottom, width=1.0, color="#dddddd", label="untimed")
    binned = " (binned means)" if len(all_rows) > MAX_BINS else ""
    if others and rows:
        scale = len(rows) / max(len(all_rows), 1)
        top = max(r[0] for r in rows)
        other_kinds = ", ".join(k for k in summary.cycle_kinds if k != kind)
        xs_other = [min(i * scale, len(rows) - 1) - 0.5 for i in others]
        ax_run.plot(xs_other, [top * 1.04] * len(xs_other), "v", color="black", markersize=4,
                    linestyle="none",
                    label=f"{other_kinds} cycles ({len(others)}, marked, not stacked)")
    what = f"{kind} cycles" if kind else "cycle"
    ax_run.set_title(f"rank {lead.rank}: top-level phases per {what}{binned}")
    ax_run.set_xlabel("cycle" if not binned else "cycle bin")
    ax_run.set_ylabel(f"{basis} time (ms)")

    ranks = []
    for proc in procs:
        rrows = _top_level_per_cycle(proc, basis, names, kind)
        total = sum(r[0] for r in rrows)
        if total <= 0:
            continue
        shares = [100.0 * sum(r[1][i] for r in rrows) / total for i in range(len(names))]
        ranks.append((f"r{proc.rank}\npid {proc.header.get('pid')}", shares))
    bottom = [0.0] * len(ranks)
    for i, name in enumerate(names):
        vals = [s[i] for _, s in ranks]
        ax_rank.bar(range(len(ranks)), vals, bottom=bottom, color=colors[i % len(colors)])
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax_rank.bar(range(len(ranks)), [max(100.0 - b, 0.0) for b in bottom], bottom=bottom,
                color="#dddddd")
    ax_rank.set_xticks(range(len(ranks)), [label for label, _ in ranks], fontsize=8)
    ax_rank.set_ylim(0, 100)
    ax_rank.set_ylabel("share of cycle (%)")
    ax_rank.set_title("per process")
    ax_run.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_sweep_chart(rows: list[dict], path: Path, *, baseline_tokens_per_s=None,
                      best_label: str | None = None, title: str = "sweep",
                      baseline_ci=None) -> Path:
    """Two panels per sweep point: tokens/s (best point marked, the baseline as a dashed line)
    and the top-level phases' shares of the cycle (rows: label, tokens_per_s, phase_shares,
    error)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    labels = [r["label"].replace(" ", "\n") for r in rows]
    xs = list(range(len(rows)))
    colors = plt.get_cmap("tab20").colors
    fig, (ax_tps, ax_share) = plt.subplots(2, 1, figsize=(max(7, 1.3 * len(rows) + 3), 8),
                                           sharex=True)
    values = [r.get("tokens_per_s") or 0.0 for r in rows]
    bar_colors = ["#d62728" if r["label"] == best_label else "#1f77b4" for r in rows]
    ax_tps.bar(xs, values, color=bar_colors)
    cis = [r.get("tokens_per_s_ci") for r in rows]   # repeated sweeps: 95% intervals
    if any(cis):
        low = [v - ci[0] if ci else 0.0 for v, ci in zip(values, cis)]
        high = [ci[1] - v if ci else 0.0 for v, ci in zip(values, cis)]
        ax_tps.errorbar(xs, values, yerr=[low, high], fmt="none", ecolor="black", capsize=4,
                        linewidth=1)
    for x, row, value in zip(xs, rows, values):
        if row.get("error"):
            ax_tps.text(x, 0, "failed", ha="center", va="bottom", fontsize=8, rotation=90)
        elif row["label"] == best_label:
            top = max(value, (row.get("tokens_per_s_ci") or [0, 0])[1])  # above its interval
            ax_tps.annotate("best", (x, top), ha="center", va="bottom", fontsize=9,
                            color="#d62728", xytext=(0, 2), textcoords="offset points")
    if baseline_tokens_per_s:
        ax_tps.axhline(baseline_tokens_per_s, color="black", linestyle="--", linewidth=1,
                       label=f"baseline (no speculation) {baseline_tokens_per_s:.1f} tok/s")
        if baseline_ci:  # repeated sweeps: the baseline's 95% interval as a band
            ax_tps.axhspan(baseline_ci[0], baseline_ci[1], color="black", alpha=0.08,
                           label="baseline 95% interval")
        ax_tps.legend(fontsize=8, loc="best")
    ax_tps.set_ylabel("output tokens/s")
    ax_tps.set_title(title)

    names = list(dict.fromkeys(n for r in rows for n in (r.get("phase_shares") or {})))
    bottom = [0.0] * len(rows)
    for i, name in enumerate(names):
        vals = [(r.get("phase_shares") or {}).get(name) or 0.0 for r in rows]
        ax_share.bar(xs, vals, bottom=bottom, color=colors[i % len(colors)], label=name)
        bottom = [b + v for b, v in zip(bottom, vals)]
    timed = [bool(r.get("phase_shares")) for r in rows]
    ax_share.bar(xs, [max(100.0 - b, 0.0) if t else 0.0 for b, t in zip(bottom, timed)],
                 bottom=bottom, color="#dddddd", label="untimed")
    ax_share.set_ylim(0, 100)
    ax_share.set_ylabel("share of cycle (%)")
    ax_share.set_xticks(xs, labels, fontsize=8)
    ax_share.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
