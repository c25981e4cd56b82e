"""report.html of a sweep (profile.remote --matrix, profile.sweep): the verdict in words, every
point's runs (a dot per start, coloured by GPU or host block), the rounds and what was dropped
when, the per-phase companion, the plan, and a link to each point's own page.

    write_sweep_page(run_dir, doc, text)   # doc: sweep.json's content; text: sweep.txt

The verdict's words are sweep.txt's own sentences (the lines under its table), so the page and
the table never say two things.
"""

from __future__ import annotations

import math
from pathlib import Path

from patchkit.report.bootstrap import DASH
from patchkit.report.html_page import PAGE_FILE, esc, facts, figure, fmt, interval, num, page, section, table
from patchkit.report.svgfig import PALETTE, SvgFigure, plain_log_ticks


def write_sweep_page(run_dir, doc: dict, text: str) -> Path:
    run = Path(run_dir)
    words = _words(text)
    sections = [
        ("verdict", "verdict", "The verdict", _verdict(doc, words)),
        ("points", "points", "Every start of every point", _points(run, doc)),
    ]
    if doc.get("rounds"):
        sections.append(("rounds", "rounds", "Rounds and drops", _rounds(doc)))
    if (doc.get("phase_verdict") or {}).get("points"):
        sections.append(
            ("phases", "phases", "Phase by phase against the leader", _phases(doc["phase_verdict"]))
        )
    if doc.get("plan"):
        sections.append(("plan", "plan", "What deciding would take", _plan(doc["plan"], words)))
    sections.append(("sweep", "setup", "The sweep", _setup(doc)))
    sections.append(
        (
            "table",
            "sweep.txt",
            "sweep.txt",
            f"<details><summary>the whole table</summary><pre>{esc(text)}</pre></details>",
        )
    )
    body = "".join(section(sid, name, html) for sid, _, name, html in sections)
    what = _matrix(doc.get("matrix"))
    title = f"sweep {what}" if what else "sweep"
    html = page(
        title, f"patchkit sweep report of {esc(run.name)}", [(sid, nav) for sid, nav, _, _ in sections], body
    )
    path = run / PAGE_FILE
    path.write_text(html, encoding="utf-8")
    return path


def _matrix(matrix) -> str:
    """The matrix as typed: ``key=v1,v2;key2=...`` (sweep.json keeps a dict, or the text)."""
    if isinstance(matrix, dict):
        return ";".join(f"{k}={','.join(map(str, v))}" for k, v in matrix.items())
    return str(matrix or "")


def _words(text: str) -> list[str]:
    """sweep.txt's sentences: the lines after the table's first blank line."""
    lines = text.splitlines()
    if "" in lines:
        lines = lines[lines.index("") + 1 :]
    return [ln.strip() for ln in lines if ln.strip()]


def _verdict(doc: dict, words: list[str]) -> str:
    verdict = doc.get("verdict") or {}
    head = next((w for w in words if w.startswith("verdict:")), None)
    if verdict.get("significant") and verdict.get("best"):
        big = "Best: " + num(verdict["best"], key=("sweep", "verdict", "best"), tag="span")
    elif verdict:
        contenders = ", ".join(verdict.get("indistinguishable") or []) or "-"
        big = f"Not decided: {esc(contenders)} cannot be told apart"
    else:
        big = "No verdict (one repetition, or one point)"
    rest = []
    for w in words:  # the per-phase lines and the plan have sections of their own
        if w.startswith(("phases against", "tok/s: median")):
            break
        if w != head and not w.startswith(("to resolve", "to decide")):
            rest.append(w)
    return (
        f'<p class="verdict">{big}</p>'
        + (f'<p class="lead">{esc(head)}</p>' if head else "")
        + ("<ul>" + "".join(f"<li>{esc(w)}</li>" for w in rest) + "</ul>" if rest else "")
    )


def _runs(row: dict) -> list[dict]:
    """A row's starts as {tokens_per_s, block, rep, report}: profile.remote keeps ``runs``,
    profile.sweep ``repeats`` and ``reports``."""
    if row.get("runs"):
        return [r for r in row["runs"] if r.get("tokens_per_s") is not None]
    reps = row.get("repeats") or [row.get("tokens_per_s")]
    reports = row.get("reports") or [row.get("report")]
    return [
        {"tokens_per_s": v, "block": None, "rep": i + 1, "report": reports[i] if i < len(reports) else None}
        for i, v in enumerate(reps)
        if v is not None
    ]


def _page_link(run: Path, report: str | None) -> str:
    """A link to a point's page (else its table); a folder that is not there is named, unlinked."""
    if not report:
        return ""
    for name in (PAGE_FILE, "table.txt"):
        if (run / report / name).is_file():
            return f'<a href="{esc(report)}/{name}">{esc(report)}</a>'
    return esc(report)


def _points(run: Path, doc: dict) -> str:
    rows = list(doc.get("rows") or [])
    baseline = doc.get("baseline")
    entries = (
        [("baseline (no speculation)", baseline)] if baseline and baseline.get("tokens_per_s") else []
    ) + [(r["label"], r) for r in rows]
    blocks = sorted(
        {str(r.get("block")) for _, row in entries for r in _runs(row) if r.get("block") is not None}
    )
    verdict = doc.get("verdict") or {}
    return (
        '<p class="lead">Each dot is one server start (with profile.sweep: one measured pass)'
        + (", coloured by the GPU or host it ran on" if blocks else "")
        + "; rest the pointer on it for its tokens/s. Each point's own page: the links below.</p>"
        + figure(_points_figure(entries, blocks, verdict))
        + table(
            ["point", "tok/s (median)", "95 % interval", "starts", "accept len", "pages"],
            _points_rows(run, entries, baseline, verdict),
            text_cols=(0, 5),
        )
    )


def _points_figure(entries: list[tuple[str, dict]], blocks: list[str], verdict: dict) -> str:
    """A dot per start and point (coloured by the GPU or host it ran on), each point's median
    and 95 % interval as a bar under its dots."""
    colour = {b: PALETTE[i % len(PALETTE)] for i, b in enumerate(blocks)}
    fig = SvgFigure("points", 10.5, 0.55 * len(entries) + 1.5)
    ax = fig.add_axes()
    for y, (label, row) in enumerate(entries):
        runs = _runs(row)
        for i, r in enumerate(runs):
            block = str(r["block"]) if r.get("block") is not None else None
            dy = (
                (blocks.index(block) - (len(blocks) - 1) / 2) * 0.12
                if block
                else (i - (len(runs) - 1) / 2) * 0.05
            )
            dot = ax.plot(
                [r["tokens_per_s"]],
                [y + dy],
                "o",
                markersize=6,
                color=colour.get(block or "", PALETTE[0]),
                alpha=0.85,
            )[0]
            where = f" on {block}" if block else ""
            fig.tip(dot, f"{label}, start {r.get('rep', i + 1)}{where}: {r['tokens_per_s']:,.1f} tok/s")
        ci = row.get("tokens_per_s_ci")
        mid = row.get("tokens_per_s_median", row.get("tokens_per_s"))
        if ci:
            bar = ax.plot(ci, [y - 0.3, y - 0.3], "-", color="#333", linewidth=2)[0]
            fig.tip(bar, f"{label}: 95 % interval {ci[0]:,.1f}{DASH}{ci[1]:,.1f} tok/s (geometric mean)")
        if mid is not None:
            tick = ax.plot([mid], [y - 0.3], "|", markersize=12, color="#333", markeredgewidth=2)[0]
            fig.tip(tick, f"{label}: median {mid:,.1f} tok/s over {len(runs)} start(s)")
    # the axis spans the starts themselves: an interval of two or three starts can reach far
    # past them (t with 1-2 df); it is cut at the axis, and written whole in the table below
    seen = [r["tokens_per_s"] for _, row in entries for r in _runs(row)]
    if seen:
        pad = max(0.15 * (max(seen) - min(seen)), 0.05 * max(seen))
        ax.set_xlim(max(min(seen) - pad, 0), max(seen) + pad)
    ax.set_yticks(range(len(entries)), [_mark(label, verdict) for label, _ in entries], fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel("output tokens/s (dots: one per start; bar: median and 95 % interval, cut at the axis)")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    for b in blocks:
        ax.plot([], [], "o", color=colour[b], label=b)
    if blocks:
        ax.legend(
            fontsize=8, frameon=False, loc="lower left", bbox_to_anchor=(0, 1.0), ncol=min(len(blocks), 6)
        )
    return fig.svg()


def _points_rows(
    run: Path, entries: list[tuple[str, dict]], baseline: dict | None, verdict: dict
) -> list[str]:
    """The table's rows: each point's median tok/s, its interval, starts, accept length and pages."""
    body = []
    for label, row in entries:
        key = ("sweep", "rows", {"label": label}) if row is not baseline else ("sweep", "baseline")
        reports = row.get("reports") or ([row["report"]] if row.get("report") else [])
        body.append(
            f'<td class="txt">{esc(_mark(label, verdict))}</td>'
            + num(
                row.get("tokens_per_s_median", row.get("tokens_per_s")),
                ",.1f",
                key=(*key, "tokens_per_s_median" if "tokens_per_s_median" in row else "tokens_per_s"),
            )
            + interval(row.get("tokens_per_s_ci"), ",.1f", key=(*key, "tokens_per_s_ci"))
            + f"<td>{len(_runs(row))}</td>"
            + num(row.get("accept_length"), ".2f", key=(*key, "accept_length"))
            + f'<td class="txt">{esc(row.get("error") or "")}{" ".join(_page_link(run, r) for r in reports)}</td>'
        )
    return body


def _mark(label: str, verdict: dict) -> str:
    if verdict.get("significant") and verdict.get("best") == label:
        return f"{label}  ★ best"
    if verdict.get("top") == label and not verdict.get("significant"):
        return f"{label}  (top)"
    return label


def _rounds(doc: dict) -> str:
    labels = [r["label"] for r in doc.get("rows") or []]
    dropped = doc.get("dropped") or {}
    body = []
    for rnd in doc["rounds"]:
        cells = [f"<td>{rnd['round']}</td>"]
        for label in labels:
            value = (rnd.get("tokens_per_s") or {}).get(label)
            error = (rnd.get("errors") or {}).get(label)
            if value is not None:
                cells.append(
                    num(
                        value, ",.1f", key=("sweep", "rounds", {"round": rnd["round"]}, "tokens_per_s", label)
                    )
                )
            elif error:
                cells.append(f'<td class="bad" title="{esc(error)}">failed</td>')
            elif label in dropped and dropped[label].get("round", 0) < rnd["round"]:
                cells.append('<td class="note">dropped</td>')
            else:
                cells.append("<td>-</td>")
        cells.append(f"<td>{fmt(rnd.get('minutes'), '.1f')}</td>")
        body.append("".join(cells))
    drops = "".join(
        f"<li>after round {esc(why.get('round'))}: <b>{esc(label)}</b> — {esc(why.get('reason'))}</li>"
        for label, why in dropped.items()
    )
    stopped = doc.get("stopped")
    return (
        f'<p class="lead">{len(doc["rounds"])} round(s)'
        + (f" of at most {esc(doc['max_rounds'])}" if doc.get("max_rounds") else "")
        + (f", budget {fmt(doc['budget_minutes'], 'g')} min" if doc.get("budget_minutes") is not None else "")
        + (f"; stopped: {esc(stopped)}" if stopped else "")
        + ". Tokens/s per start, by round (minutes: the sweep's clock at the round's end).</p>"
        + table(["round", *labels, "minutes"], body, text_cols=())
        + (f"<h3>Dropped</h3><ul>{drops}</ul>" if drops else '<p class="note">No point was dropped.</p>')
    )


def _phases(pv: dict) -> str:
    rows = [
        (label, phase, e)
        for label, phases in pv["points"].items()
        for phase, e in phases.items()
        if e.get("ratio")
    ]
    if not rows:
        return '<p class="note">No phase compared.</p>'
    fig = SvgFigure("phases", 10.5, 0.26 * len(rows) + 1.3)
    ax = fig.add_axes()
    for y, (label, phase, e) in enumerate(rows):
        ci = e.get("ratio_ci")
        colour = "#d62728" if e.get("differs") else "#5b6472"
        if ci:
            ax.plot(ci, [y, y], "-", color=colour, linewidth=1.6, alpha=0.7)
        dot = ax.plot([e["ratio"]], [y], "o", color=colour, markersize=5)[0]
        ci_text = f" [{ci[0]:.3f}{DASH}{ci[1]:.3f}]" if ci else ""
        fig.tip(
            dot,
            f"{label}, {phase}: {e['ms']:.3f} vs {e['leader_ms']:.3f} ms, {e['ratio']:.3f}x{ci_text}"
            + (" — differs" if e.get("differs") else ""),
        )
    ax.axvline(1.0, color="#333", linewidth=0.8)
    ax.set_xscale("log")
    plain_log_ticks(ax.xaxis)
    lo = min(min((e.get("ratio_ci") or [e["ratio"]])[0], e["ratio"]) for _, _, e in rows)
    hi = max(max((e.get("ratio_ci") or [e["ratio"]])[-1], e["ratio"]) for _, _, e in rows)
    # at most 10x either way: an interval of two starts can span orders of magnitude; its
    # ends beyond the axis are cut there (the table gives them)
    span = min(max(abs(math.log10(max(lo, 1e-9))), abs(math.log10(max(hi, 1e-9))), 0.05) * 1.1, 1.0)
    ax.set_xlim(10**-span, 10**span)
    ax.set_yticks(range(len(rows)), [f"{label}: {phase}" for label, phase, _ in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"ms per decode cycle against {pv.get('leader')} (ratio, log scale; red: differs)")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    body = [
        f'<td class="txt">{esc(label)}</td><td class="txt">{esc(phase)}</td>'
        + num(e.get("ms"), ".3f", key=("sweep", "phase_verdict", "points", label, phase, "ms"))
        + num(e.get("leader_ms"), ".3f", key=("sweep", "phase_verdict", "points", label, phase, "leader_ms"))
        + num(e.get("ratio"), ".3f", "x", key=("sweep", "phase_verdict", "points", label, phase, "ratio"))
        + interval(
            e.get("ratio_ci"), ".3g", key=("sweep", "phase_verdict", "points", label, phase, "ratio_ci")
        )
        + f"<td>{'differs' if e.get('differs') else '-'}</td>"
        for label, phase, e in rows
    ]
    return (
        f'<p class="lead">Each point against <b>{esc(pv.get("leader"))}</b>, phase by phase: ms per decode cycle, '
        f"and the ratio's interval on log ms (each phase's spread between starts from every point), family-wise "
        f"{100 * (1 - pv.get('alpha', 0.05)):.0f} % over every (point, phase) pair. "
        "Device phases vary far less between starts than tokens/s do.</p>"
        + figure(fig.svg())
        + table(["point", "phase", "ms", "leader ms", "ratio", "interval", ""], body, text_cols=(0, 1))
    )


def _plan(plan: dict, words: list[str]) -> str:
    line = next((w for w in words if w.startswith("to resolve") or w.startswith("to decide")), "")
    body = [
        f'<td class="txt">{esc(label)}</td>'
        + num(e.get("more_runs"), ",d", key=("sweep", "plan", "points", label, "more_runs"))
        + num(e.get("minutes"), ",.1f", key=("sweep", "plan", "points", label, "minutes"))
        + num(None if e.get("spread") is None else 100 * e["spread"], ".1f", " %")
        for label, e in (plan.get("points") or {}).items()
    ]
    return (f'<p class="lead">{esc(line)}</p>' if line else "") + (
        table(["point", "more starts", "minutes", "spread between starts"], body) if body else ""
    )


def _setup(doc: dict) -> str:
    env = doc.get("env") or {}
    cost = (doc.get("verdict") or {}).get("cost") or {}
    items = [
        ("series", esc(Path(str(doc.get("series") or "")).name)),
        ("targets", esc(", ".join(map(str, doc.get("targets") or [])))),
        ("device", esc(doc.get("device") or "")),
        ("matrix", f"<code>{esc(_matrix(doc.get('matrix')))}</code>" if doc.get("matrix") else ""),
        ("server command", f"<code>{esc(doc['server_command'])}</code>" if doc.get("server_command") else ""),
        (
            "server environment",
            f"<code>{esc(' '.join(f'{k}={v}' for k, v in env.items()))}</code>" if env else "",
        ),
        (
            "benchmark command",
            f"<code>{esc(doc['bench_command'])}</code>" if doc.get("bench_command") else "",
        ),
        ("repetitions", f"{esc(doc.get('repeat'))}, warm-up {'on' if doc.get('warmup') else 'off'}"),
        (
            "cost",
            f"{fmt(cost.get('server_starts'), 'd')} server starts, {fmt(cost.get('minutes'), '.1f')} min"
            if cost
            else "",
        ),
        ("wall time", f"{fmt(doc.get('wall_s'), ',.0f')} s"),
    ]
    return facts(items)
