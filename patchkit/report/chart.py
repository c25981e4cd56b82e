"""phases.png: where each cycle's time goes, over the run and per rank; sweep.png: tokens/s and
phase shares per sweep point (matplotlib, Agg).

Only steady-state cycles of the kind the report describes first (decode when there is one)
are stacked; cycles of other kinds (prefill) and stall cycles are marked where they ran, as
ticks along the top, so that a few long cycles neither dominate the bars nor enter the
shares. Cycles that sampled timing left untimed are not drawn. The title names the run
(model, worker, timer mode, date), the x axis says how many cycles one bar stands for, the
legend sits below the bars, and a second panel gives every top-level phase's share as a
labelled bar (a phase of 0.3% stays readable), with its 95 % interval as a whisker and in the
label: each process's shares and intervals computed as summary.json's (summarize.process_shares).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from patchkit.report import measured
from patchkit.report.bootstrap import DASH
from patchkit.report.kinds import cycle_kind
from patchkit.report.load import ProcessTiming
from patchkit.report.summarize import process_shares

MAX_BINS = 200


def _palette(plt, name: str) -> list[tuple[float, float, float, float]]:
    """The colours of one of matplotlib's qualitative colour maps (tab10: 10 of them), in order."""
    cmap = plt.get_cmap(name)
    return [cmap(i) for i in range(cmap.N)]


def _top_level_per_cycle(
    proc: ProcessTiming,
    basis: str,
    names: list[str],
    kind=None,
    others: list | None = None,
    stalls: set | None = None,
    stalled: list | None = None,
):
    """For each steady cycle of `kind` (in order): its time and the time of each top-level
    phase, in ms. Cycles of other kinds append, to `others`, the row index they came before;
    stall cycles (indices in `stalls`) likewise to `stalled`."""
    field = "dev_ns" if basis == "device" else "host_ns"
    stalls = stalls or set()
    by_cycle: dict[int, dict[str, float]] = {}
    for r in proc.phases:
        if r.get("depth") == 0 and r.get("cycle") is not None and r.get(field) is not None:
            slot = by_cycle.setdefault(r["cycle"], {})
            slot[r["name"]] = slot.get(r["name"], 0.0) + r[field] / 1e6
    rows: list[tuple[float, list[float]]] = []
    for c in sorted(proc.cycles, key=lambda c: c["cycle"]):
        if kind is not None and cycle_kind(c) != kind:
            if others is not None:
                others.append(len(rows))
            continue
        if c["cycle"] in stalls:
            if stalled is not None:
                stalled.append(len(rows))
            continue
        if c.get("ab") == "off" or c.get("timed") is False or c.get(field) is None:
            continue
        parts = by_cycle.get(c["cycle"], {})
        rows.append((c[field] / 1e6, [parts.get(n, 0.0) for n in names]))
    return rows


def share_bars(procs: list[ProcessTiming], stalls: list[set], kind, basis: str, names: list[str]) -> list:
    """The share panel's bars: per process with timed cycles (label, the top-level phases'
    shares in `names` order, their 95 % intervals with the untimed rest's last), computed as
    summary.json's are (summarize.process_shares: the same block bootstrap, each timed cycle
    weighed 1/p when p varied)."""
    weights = measured.cycle_weights(procs, [{c["cycle"]: c for c in p.timed_cycles} for p in procs])
    bars = []
    for pi, (proc, st) in enumerate(zip(procs, stalls)):
        steady = {
            c["cycle"]: c
            for c in proc.timed_cycles
            if c["cycle"] not in st and (kind is None or cycle_kind(c) == kind)
        }
        got = process_shares(proc, steady, basis, None if weights is None else weights[pi])
        if not got["share"]:
            continue
        top = got["top_ci95"]
        rest = None if top is None else (max(100.0 - top[1], 0.0), max(100.0 - top[0], 0.0))
        bars.append(
            (
                f"r{proc.rank} pid {proc.header.get('pid')}",
                [got["share"].get(n, 0.0) for n in names],
                [got["share_ci95"].get(n) for n in names] + [rest],
            )
        )
    return bars


def _binned(rows, bins):
    if len(rows) <= bins:
        return rows
    size = len(rows) / bins
    out = []
    for b in range(bins):
        chunk = rows[int(b * size) : int((b + 1) * size)] or rows[-1:]
        total = sum(r[0] for r in chunk) / len(chunk)
        parts = [sum(r[1][i] for r in chunk) / len(chunk) for i in range(len(chunk[0][1]))]
        out.append((total, parts))
    return out


def _model_from_command(command) -> str | None:
    words = str(command or "").split()
    for flag in ("--model-path", "--model"):
        for i, word in enumerate(words):
            if word == flag and i + 1 < len(words):
                return words[i + 1].rstrip("/").rsplit("/", 1)[-1]
            if word.startswith(flag + "="):
                return word.split("=", 1)[1].rstrip("/").rsplit("/", 1)[-1]
    return None


def chart_title(summary, procs: list[ProcessTiming]) -> str:
    """The run in one line: model, worker, timer mode and date (what meta and the headers
    say; parts that are not known are left out)."""
    meta = summary.meta or {}
    model = meta.get("model") or _model_from_command(meta.get("server_command") or meta.get("server command"))
    if not model and meta.get("workload"):
        model = str(meta["workload"]).split(";")[0]
    worker = meta.get("worker") or meta.get("speculative worker (server log)")
    mode = f"timer {summary.mode}"
    sampling = getattr(summary, "sampling", None)
    if sampling and sampling.get("every"):
        mode += f", 1 cycle in {sampling['every']} timed"
    elif sampling and sampling.get("budget") and sampling["budget"].get("timed_fraction") is not None:
        budget = sampling["budget"]
        mode += f", budget {budget['pct']:g}%: {100 * budget['timed_fraction']:.0f}% of cycles timed"
    walls: list[int] = [
        w for w in ((p.header.get("clock") or {}).get("wall_t0_ns") for p in procs) if isinstance(w, int)
    ]
    date = None
    if walls:
        date = datetime.fromtimestamp(min(walls) / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [str(model) if model else None, f"worker {worker}" if worker else None, mode, date]
    return " | ".join(p for p in parts if p)


def _acceptance_panel(ax, acc: dict) -> None:
    """Accepted at position k among the request steps that drafted k (bars, labelled), the
    share of request steps by accepted drafts (dots), and both mean accept lengths."""
    rates = [(r["position"], r["rate"]) for r in acc["position_rate"] if r["rate"] is not None]
    xs = [k for k, _ in rates]
    vals = [100.0 * v for _, v in rates]
    bars = ax.bar(xs, vals, color="#4c72b0", label="accepted at k (of those that drafted k)")
    for bar, v in zip(bars, vals):
        ax.text(bar.get_x() + bar.get_width() / 2, v + 1.5, f"{v:.0f}", ha="center", fontsize=7)
    total = acc["request_steps"] or 1
    ax.plot(
        range(len(acc["histogram"])),
        [100.0 * n / total for n in acc["histogram"]],
        "o",
        color="#dd8452",
        label="request steps that accepted k (%)",
    )
    means = acc["mean_accept_length"]
    per_req = means["per_request"]
    ax.set_title(
        f"acceptance: length {means['pooled']:.2f} pooled"
        + (f", {per_req:.2f} per request" if per_req is not None else ""),
        fontsize=10,
    )
    ax.set_xlabel(f"draft position k (num_steps {acc['num_steps']})")
    ax.set_ylabel("%")
    ax.set_ylim(0, 110)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, -0.14), frameon=False)


def figure(procs: list[ProcessTiming], summary, stalls: list[set] | None = None):
    """The matplotlib figure of phases.png (write_chart saves it)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    basis = summary.basis
    stalls = stalls or [set() for _ in procs]
    kind = summary.primary_kind if len(summary.cycle_kinds) > 1 else None
    phases = summary.cycle_kinds[kind]["phases"] if kind else summary.phases
    names = [e["name"] for e in phases if e["depth"] == 0 and e["per_cycle"]]
    names = list(dict.fromkeys(names))
    share_of = {e["name"]: e["share_of_cycle"] for e in phases if e["depth"] == 0}
    colors = _palette(plt, "tab10")
    acc = getattr(summary, "acceptance", None)
    if acc:
        fig, (ax_run, ax_share, ax_acc) = plt.subplots(
            1, 3, figsize=(17, 5.5), gridspec_kw={"width_ratios": [3, 1.3, 1.0]}
        )
        _acceptance_panel(ax_acc, acc)
    else:
        fig, (ax_run, ax_share) = plt.subplots(
            1, 2, figsize=(14, 5.5), gridspec_kw={"width_ratios": [3, 1.3]}
        )
    _run_panel(ax_run, procs[0], summary, names, kind, stalls[0], share_of, colors)
    _share_panel(ax_share, procs, stalls, kind, basis, names, colors)
    fig.suptitle(chart_title(summary, procs), fontsize=11)
    fig.tight_layout()
    return fig


def _run_panel(
    ax_run, lead: ProcessTiming, summary, names: list[str], kind, stall_set: set, share_of: dict, colors
) -> None:
    """The lead rank's top-level phases stacked per steady-state cycle (binned past MAX_BINS),
    the untimed rest on top, cycles of other kinds and stalls marked above the bars."""
    basis = summary.basis
    others: list[int] = []
    stalled: list[int] = []
    all_rows = _top_level_per_cycle(lead, basis, names, kind, others, stall_set, stalled)
    rows = _binned(all_rows, MAX_BINS)
    xs = list(range(len(rows)))
    bottom = [0.0] * len(rows)
    for i, name in enumerate(names):
        vals = [r[1][i] for r in rows]
        share = share_of.get(name)
        label = name if share is None else f"{name} ({share:.1f}%)"
        ax_run.bar(xs, vals, bottom=bottom, width=1.0, color=colors[i % len(colors)], label=label)
        bottom = [b + v for b, v in zip(bottom, vals)]
    rest = [max(r[0] - b, 0.0) for r, b in zip(rows, bottom)]
    ax_run.bar(xs, rest, bottom=bottom, width=1.0, color="#dddddd", label="untimed")
    binned = len(all_rows) > MAX_BINS
    top = max((r[0] for r in rows), default=1.0)
    scale = len(rows) / max(len(all_rows), 1)
    for marks, marker, color, label in (
        (
            others,
            "v",
            "black",
            f"{', '.join(k for k in summary.cycle_kinds if k != kind)} cycles "
            f"({len(others)}, marked, not stacked)",
        ),
        (stalled, "x", "#d62728", f"stalls ({len(stalled)}, marked, not stacked)"),
    ):
        if marks and rows:
            xs_mark = [min(i * scale, len(rows) - 1) - 0.5 for i in marks]
            ax_run.plot(
                xs_mark,
                [top * 1.04] * len(xs_mark),
                marker,
                color=color,
                markersize=5,
                linestyle="none",
                label=label,
            )
    what = f"{kind} cycle" if kind else "cycle"
    ax_run.set_title(f"rank {lead.rank}: top-level phases per steady-state {what}", fontsize=10)
    if binned:
        ax_run.set_xlabel(
            f"cycle bin (1 bar = mean of {len(all_rows) / len(rows):.1f} cycles, {len(all_rows)} cycles)"
        )
    else:
        ax_run.set_xlabel(f"cycle (1 bar = 1 cycle, {len(all_rows)} cycles)")
    ax_run.set_ylabel(f"{basis} time (ms)")
    ax_run.legend(fontsize=8, loc="upper left", bbox_to_anchor=(0.0, -0.14), ncol=3, frameon=False)


def _share_panel(
    ax_share, procs: list[ProcessTiming], stalls: list[set], kind, basis: str, names: list[str], colors
) -> None:
    """Each phase's share per process as labelled horizontal bars with their intervals."""
    # shares per phase and process as horizontal bars, each labelled: a phase of 0.3% is
    # still a named bar with its number
    procs_shares = share_bars(procs, stalls, kind, basis, names)
    labels = names + ["untimed"]
    height = 0.8 / max(len(procs_shares), 1)
    for j, (plabel, shares, intervals) in enumerate(procs_shares):
        values = shares + [max(100.0 - sum(shares), 0.0)]
        # whiskers: the interval around the bar's end (a percentile interval can sit a little
        # to one side of the share: clipped at the share)
        xerr = [
            [max(v - ci[0], 0.0) if ci else 0.0 for v, ci in zip(values, intervals)],
            [max(ci[1] - v, 0.0) if ci else 0.0 for v, ci in zip(values, intervals)],
        ]
        ys = [i + (j - (len(procs_shares) - 1) / 2) * height for i in range(len(labels))]
        bars = ax_share.barh(
            ys,
            values,
            height=height * 0.95,
            color=[colors[i % len(colors)] for i in range(len(names))] + ["#bbbbbb"],
            edgecolor="black",
            linewidth=0.3,
            xerr=xerr,
            error_kw={"elinewidth": 0.8, "capsize": 2, "ecolor": "black"},
        )
        for bar, value, ci in zip(bars, values, intervals):
            ax_share.text(
                max(bar.get_width(), ci[1] if ci else 0.0) + 1,
                bar.get_y() + bar.get_height() / 2,
                f"{value:.1f}%"
                + (f" [{ci[0]:.1f}{DASH}{ci[1]:.1f}]" if ci else "")
                + (f" {plabel}" if len(procs_shares) > 1 else ""),
                va="center",
                fontsize=7,
            )
    ax_share.set_yticks(range(len(labels)), labels, fontsize=8)
    ax_share.invert_yaxis()
    ax_share.set_xlim(0, 140)
    ax_share.set_xlabel(
        f"share of the {kind or ''} cycle ({basis} time, %; whisker, [ ]: 95% interval)".replace("  ", " ")
    )
    ax_share.set_title("share per phase" + (" and process" if len(procs_shares) > 1 else ""), fontsize=10)


def write_chart(procs: list[ProcessTiming], summary, path: Path, stalls: list[set] | None = None) -> Path:
    import matplotlib.pyplot as plt

    fig = figure(procs, summary, stalls)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def write_sweep_chart(
    rows: list[dict],
    path: Path,
    *,
    baseline_tokens_per_s=None,
    best_label: str | None = None,
    title: str = "sweep",
    baseline_ci=None,
) -> Path:
    """Two panels per sweep point: tokens/s (best point marked, the baseline as a dashed line)
    and the top-level phases' shares of the cycle (rows: label, tokens_per_s, phase_shares,
    error)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    labels = [r["label"].replace(" ", "\n") for r in rows]
    xs = list(range(len(rows)))
    colors = _palette(plt, "tab20")
    fig, (ax_tps, ax_share) = plt.subplots(2, 1, figsize=(max(7, 1.3 * len(rows) + 3), 8), sharex=True)
    _tps_panel(ax_tps, rows, xs, best_label, baseline_tokens_per_s, baseline_ci, title)
    _sweep_share_panel(ax_share, rows, xs, labels, colors)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _tps_panel(
    ax_tps, rows: list[dict], xs: list[int], best_label, baseline_tokens_per_s, baseline_ci, title: str
) -> None:
    """Tokens/s per point with its interval, the best point marked, failed points said, the
    baseline as a dashed line (and its interval as a band)."""
    values = [r.get("tokens_per_s") or 0.0 for r in rows]
    bar_colors = ["#d62728" if r["label"] == best_label else "#1f77b4" for r in rows]
    ax_tps.bar(xs, values, color=bar_colors)
    cis = [r.get("tokens_per_s_ci") for r in rows]  # repeated sweeps: 95% intervals
    if any(cis):
        low = [v - ci[0] if ci else 0.0 for v, ci in zip(values, cis)]
        high = [ci[1] - v if ci else 0.0 for v, ci in zip(values, cis)]
        ax_tps.errorbar(xs, values, yerr=[low, high], fmt="none", ecolor="black", capsize=4, linewidth=1)
    for x, row, value in zip(xs, rows, values):
        if row.get("error"):
            ax_tps.text(x, 0, "failed", ha="center", va="bottom", fontsize=8, rotation=90)
        elif row["label"] == best_label:
            top = max(value, (row.get("tokens_per_s_ci") or [0, 0])[1])  # above its interval
            ax_tps.annotate(
                "best",
                (x, top),
                ha="center",
                va="bottom",
                fontsize=9,
                color="#d62728",
                xytext=(0, 2),
                textcoords="offset points",
            )
    if baseline_tokens_per_s:
        ax_tps.axhline(
            baseline_tokens_per_s,
            color="black",
            linestyle="--",
            linewidth=1,
            label=f"baseline (no speculation) {baseline_tokens_per_s:.1f} tok/s",
        )
        if baseline_ci:  # repeated sweeps: the baseline's 95% interval as a band
            ax_tps.axhspan(
                baseline_ci[0], baseline_ci[1], color="black", alpha=0.08, label="baseline 95% interval"
            )
        ax_tps.legend(fontsize=8, loc="best")
    ax_tps.set_ylabel("output tokens/s")
    ax_tps.set_title(title)


def _sweep_share_panel(ax_share, rows: list[dict], xs: list[int], labels: list[str], colors) -> None:
    """The points' top-level phase shares stacked, the untimed rest on top (timed points only)."""
    names = list(dict.fromkeys(n for r in rows for n in (r.get("phase_shares") or {})))
    bottom = [0.0] * len(rows)
    for i, name in enumerate(names):
        vals = [(r.get("phase_shares") or {}).get(name) or 0.0 for r in rows]
        ax_share.bar(xs, vals, bottom=bottom, color=colors[i % len(colors)], label=name)
        bottom = [b + v for b, v in zip(bottom, vals)]
    timed = [bool(r.get("phase_shares")) for r in rows]
    ax_share.bar(
        xs,
        [max(100.0 - b, 0.0) if t else 0.0 for b, t in zip(bottom, timed)],
        bottom=bottom,
        color="#dddddd",
        label="untimed",
    )
    ax_share.set_ylim(0, 100)
    ax_share.set_ylabel("share of cycle (%)")
    ax_share.set_xticks(xs, labels, fontsize=8)
    ax_share.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
