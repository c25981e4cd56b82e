"""report.html's prediction: tokens/s predicted per num-steps with 95 % intervals (named by what
they cover: this run's cycles, or start-to-start variation too), against what was measured (the
profiled point; with ``--pool`` every pooled run), and the assumptions.

From predict.json (``profile.predict``) when there is one; else summary.json's headline (the
what-if's ratios without intervals), which says how to get the rest.
"""

from __future__ import annotations

from pathlib import Path

from patchkit.report.bootstrap import DASH
from patchkit.report.html_page import S, esc, figure, fmt, interval, num, page, section, table
from patchkit.report.predict import interval_coverage
from patchkit.report.svgfig import PALETTE, SvgFigure


def prediction_section(pred: dict | None, summary: dict | None, notes: list[str] | None = None) -> str:
    """The section's HTML, or "" when neither a prediction nor a headline is known."""
    if pred:
        return _full(pred, notes or [])
    head = (summary or {}).get("prediction")
    if not head:
        return ""
    rows = [
        f"<td>{esc(n)}</td>" + num(r, ".3f", key=S("prediction", "ratio_by_num_steps", n))
        for n, r in sorted(head["ratio_by_num_steps"].items(), key=lambda kv: int(kv[0]))
    ]
    return (
        f'<p class="lead">The what-if, from this run at num-steps {esc(head["profiled_num_steps"])}: '
        f'num-steps <span class="big">{num(head["best_num_steps"], "d", key=S("prediction", "best_num_steps"), tag="span")}</span> '
        f"predicted best ({esc(head['ratio_of'])} tokens/s relative to this run). Intervals, tokens/s and the "
        "assumptions: <code>invoke profile.predict RUN</code> (this page then shows them).</p>"
        + table(["num-steps", "x this run"], rows, text_cols=())
    )


def _figure(pred: dict) -> str:
    points = pred["points"]
    fig = SvgFigure("prediction", 10.5, 3.6)
    ax = fig.add_axes()
    use_tps = all(p.get("tokens_per_s") is not None for p in points)
    key, ci_key, label = (
        ("tokens_per_s", "tokens_per_s_ci95", "output tokens/s")
        if use_tps
        else ("ratio_to_profiled", "ratio_ci95", "x the profiled point")
    )
    xs = [p["num_steps"] for p in points]
    ax.plot(xs, [p[key] for p in points], "-", color=PALETTE[0], linewidth=1, alpha=0.6)
    for p in points:
        ci = p.get(ci_key)
        # a pooled point's centre is the median over starts, its interval the mean's: a centre
        # on (or, by rounding, a hair outside) an end draws no bar on that side
        err = [[max(0.0, p[key] - ci[0])], [max(0.0, ci[1] - p[key])]] if ci else None
        bars = ax.errorbar(
            [p["num_steps"]], [p[key]], yerr=err, fmt="o", color=PALETTE[0], capsize=4, markersize=6
        )
        ci_text = (
            f" [{ci[0]:,.1f}{DASH}{ci[1]:,.1f}]"
            if ci and use_tps
            else f" [{ci[0]:.3f}{DASH}{ci[1]:.3f}]"
            if ci
            else ""
        )
        fig.tip(
            bars.lines[0],
            f"num-steps {p['num_steps']}: predicted {p[key]:,.{1 if use_tps else 3}f} {label}{ci_text}, accept length {p['accept_length']:.2f}",
        )
    prof = pred["profiled"]
    measured = prof.get("tokens_per_s") if use_tps else 1.0
    if measured is not None:
        mark = ax.plot(
            [prof["num_steps"]],
            [measured],
            "D",
            color="#d62728",
            markersize=8,
            markerfacecolor="none",
            markeredgewidth=1.6,
            label="measured (the profiled run)",
        )[0]
        fig.tip(mark, f"measured at num-steps {prof['num_steps']}: {measured:,.1f} {label}")
    pooled = (pred.get("pooled") or {}).get("profiled_tokens_per_s") or []
    if use_tps and len(pooled) > 1:
        for i, v in enumerate(pooled):
            if v is not None:
                dot = ax.plot([prof["num_steps"] + 0.12], [v], ".", color="#d62728", markersize=6)[0]
                fig.tip(dot, f"pooled run {i + 1}: measured {v:,.1f} tok/s at num-steps {prof['num_steps']}")
        ax.plot([], [], ".", color="#d62728", label="each pooled run, measured")
    scope = _scope(interval_coverage(pred))
    ax.errorbar(
        [], [], yerr=[], fmt="o", color=PALETTE[0], capsize=4, label=f"predicted, 95 % interval ({scope})"
    )
    ax.set_xticks(xs)
    ax.set_xlabel("num-steps (topk 1)")
    ax.set_ylabel(label)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.legend(fontsize=8, frameon=False, loc="lower right")
    return figure(fig.svg())


def _scope(coverage: dict) -> str:
    """The short name of what an interval covers, for a column head or a legend."""
    return "start-to-start variation included" if coverage["start_to_start"] else "this run's cycles only"


def _full(pred: dict, notes: list[str]) -> str:
    prof, best = pred["profiled"], pred["best"]
    rows = []
    for p in pred["points"]:
        k = ("predict", "points", {"num_steps": p["num_steps"]})
        rows.append(
            f"<td>{p['num_steps']}{' (profiled)' if p.get('profiled') else ''}</td>"
            + num(p.get("accept_length"), ".3f", key=(*k, "accept_length"))
            + num(p.get("decode_tokens_per_s"), ",.1f", key=(*k, "decode_tokens_per_s"))
            + num(p.get("ratio_to_profiled"), ".3f", key=(*k, "ratio_to_profiled"))
            + interval(p.get("ratio_ci95"), ".3f", key=(*k, "ratio_ci95"))
            + num(p.get("tokens_per_s"), ",.1f", key=(*k, "tokens_per_s"))
            + interval(p.get("tokens_per_s_ci95"), ",.1f", key=(*k, "tokens_per_s_ci95"))
            + (
                num(prof.get("tokens_per_s"), ",.1f", key=("predict", "profiled", "tokens_per_s"))
                if p.get("profiled")
                else "<td>-</td>"
            )
        )
    pooled = pred.get("pooled")
    source = f"{len(pooled['runs'])} runs (medians of their predictions)" if pooled else "this run"
    coverage = interval_coverage(pred)
    covers, scope = coverage["covers"], _scope(coverage)
    lead = (
        f'<p class="lead">Predicted from {esc(source)} at num-steps {esc(prof["num_steps"])}: num-steps '
        f'<span class="big">{num(best["num_steps"], "d", key=("predict", "best", "num_steps"), tag="span")}</span> best, '
        f"{num(best['ratio_to_profiled'], '.3f', 'x', key=('predict', 'best', 'ratio_to_profiled'), tag='span')} the profiled point. "
        f"95 % intervals: {esc(covers)}.</p>"
    )
    head = [
        "num-steps",
        "accept len",
        "decode tok/s",
        "x profiled",
        f"95 % interval ({scope})",
        "tok/s",
        f"tok/s 95 % ({scope})",
        "measured tok/s",
    ]
    assumptions = "".join(f"<li>{esc(a)}</li>" for a in pred.get("assumptions") or [])
    by_batch = ", ".join(f"{b['batch_size']}: {b['best_num_steps']}" for b in pred.get("by_batch_size") or [])
    costs = pred.get("costs") or {}
    extra = (
        f'<p class="note">Best num-steps per batch size: {esc(by_batch or "-")}. Costs measured: draft round '
        f"{fmt(costs.get('draft_step_ms'), '.3f')} ms, verify {fmt(costs.get('verify_ms_mean'), '.3f')} ms mean, "
        f"{fmt(costs.get('verify_us_per_token'), '.2f')} µs per draft token ({esc(costs.get('verify_slope_source') or '-')}).</p>"
    )
    words = "".join(f"<li>{esc(n)}</li>" for n in notes)
    return (
        lead
        + _figure(pred)
        + table(head, rows, text_cols=())
        + extra
        + f"<h3>Assumptions</h3><ul>{assumptions}</ul>"
        + (f"<h3>What checking it would take</h3><ul>{words}</ul>" if words else "")
    )


def prediction_page(pred: dict, notes: list[str] | None = None) -> str:
    """A page of the prediction alone (predict.json written away from its run's report)."""
    body = section("prediction", "Prediction", _full(pred, notes or []))
    run = str(pred.get("run") or "")
    return page(
        f"prediction from {Path(run).name or 'a run'}", esc(run), [("prediction", "prediction")], body
    )
