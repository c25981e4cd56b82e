"""report.html's acceptance: the histogram of accepted drafts, the rate per draft position,
the accept length by batch size and over the run (summary.json ``acceptance``)."""

from __future__ import annotations

from patchkit.report.bootstrap import DASH
from patchkit.report.html_page import S, esc, figure, fmt, num, table
from patchkit.report.svgfig import PALETTE, SvgFigure


def acceptance_section(a: dict) -> str:
    hist = a.get("histogram") or []
    steps = a.get("request_steps") or 0
    fig = SvgFigure("acceptance", 10.5, 5.6)
    (h_ax, p_ax), (b_ax, o_ax) = fig.add_axes(2, 2)
    _histogram_panel(fig, h_ax, hist, steps)
    _position_panel(fig, p_ax, a)
    _batch_size_panel(fig, b_ax, a.get("by_batch_size") or [])
    _over_run_panel(fig, o_ax, a)
    for ax in (h_ax, p_ax, b_ax, o_ax):
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    return _lead(a) + figure(fig.svg()) + _tables(a, hist, steps)


def _histogram_panel(fig: SvgFigure, h_ax, hist: list[int], steps: int) -> None:
    """Request steps by the number of drafts they accepted."""
    for k, count in enumerate(hist):
        bar = h_ax.bar([k], [count], color=PALETTE[0], width=0.7)[0]
        fig.tip(
            bar, f"{k} drafts accepted: {count:,} request steps ({100 * count / steps if steps else 0:.1f} %)"
        )
    h_ax.set_xticks(range(len(hist)))
    h_ax.set_xlabel("draft tokens accepted per request step")
    h_ax.set_ylabel("request steps")
    h_ax.set_title("histogram", fontsize=10)


def _position_panel(fig: SvgFigure, p_ax, a: dict) -> None:
    """The acceptance rate per draft position: of those that drafted k, of those that accepted k-1."""
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


def _batch_size_panel(fig: SvgFigure, b_ax, by: list[dict]) -> None:
    """The pooled accept length per batch size."""
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


def _over_run_panel(fig: SvgFigure, o_ax, a: dict) -> None:
    """The pooled accept length per slice of consecutive cycles, and its drift over the run."""
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


def _lead(a: dict) -> str:
    """The section's opening paragraph: the pooled accept length and what it counts."""
    mean = a.get("mean_accept_length") or {}
    return (
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


def _tables(a: dict, hist: list[int], steps: int) -> str:
    """The histogram and the per-position rates as tables, side by side."""
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
    return (
        '<div class="row"><div>'
        + table(["accepted drafts", "request steps", "share"], rows, text_cols=())
        + "</div><div>"
        + table(["position k", "accepted at k", "given k-1 accepted"], prow, text_cols=())
        + "</div></div>"
    )
