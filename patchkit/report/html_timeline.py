"""report.html's timeline: every cycle the lead rank recorded, over the run, warm-up included;
the warm-up pass and the measured window shaded, stalls circled, a drift (patchkit.report.drift)
shaded red, prefill cycles apart. Beyond
TIMELINE_POINTS decode cycles each bin's median and range are drawn instead of every cycle, so
the figure stays the same size on a long run."""

from __future__ import annotations

from patchkit.report.bootstrap import DASH
from patchkit.report.drift import drift_finding
from patchkit.report.html_page import esc, figure, fmt
from patchkit.report.kinds import KIND_PRIMARY, NO_KIND, cycle_kind, decode_kind_of
from patchkit.report.svgfig import PALETTE, SvgFigure, plain_log_ticks

TIMELINE_POINTS = 1500


def timeline_section(s: dict, selection) -> str:
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
    kind = decode_kind_of(s)
    label = "decode" if kind in (KIND_PRIMARY, NO_KIND) else str(kind)
    series, stall_pts = _timeline_series(cycles, selection, lead.rank, kind, field, t_first)
    fig = SvgFigure("timeline", 10.5, 3.4)
    ax = fig.add_axes()
    for lo, hi, colour, text in _window_spans(s, lead, t_first):
        band = ax.axvspan(lo, hi, color=colour, alpha=0.16, linewidth=0, label=text)
        fig.tip(band, f"{text}: {lo:.2f} s to {hi:.2f} s")
    for i, (lo, hi, text) in enumerate(_drift_spans(s, lead.rank, cycles, t_first)):
        band = ax.axvspan(lo, hi, color="#d62728", alpha=0.12, linewidth=0, label=None if i else "drift")
        fig.tip(band, text)
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
    _stall_marks(ax, fig, stall_pts)
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
        "(over 4x the median of their kind and 10 ms above it) are circled and left out of the shares."
        + _drift_note(s.get("drift"))
        + "</p>"
    )
    return note + figure(fig.svg())


def _drift_note(drift: dict | None) -> str:
    finding = drift_finding(drift)
    if finding is not None:
        return f' <span class="bad">Cycle time drifted: {esc(finding)} (shaded red).</span>'
    if drift and drift.get("tested"):
        return f" No drift in cycle time across the window ({drift['cycles']:,} steady {esc(drift['kind'])} cycles tested)."
    return ""


def _drift_spans(s: dict, lead_rank: int, cycles: list[dict], t_first: int) -> list[tuple[float, float, str]]:
    """The drifted segments of summary.json's ``drift`` on the timeline's axis: (from, to, tooltip)."""
    drift = s.get("drift") or {}
    if drift.get("rank") != lead_rank:
        return []
    by_number = {c["cycle"]: c for c in cycles}
    spans = []
    for seg in drift.get("segments") or []:
        first, last = by_number.get(seg["first_cycle"]), by_number.get(seg["last_cycle"])
        if first is None or last is None:
            continue
        spans.append(
            (
                (first["t0"] - t_first) / 1e9,
                (last["t0"] + last["host_ns"] - t_first) / 1e9,
                f"drift: cycles {seg['first_cycle']}{DASH}{seg['last_cycle']} ({seg['cycles']:,} cycles), "
                f"median {seg['median_ms']:.3f} ms, {seg['ratio_to_rest']:.2f}\u00d7 the rest's {seg['rest_median_ms']:.3f} ms",
            )
        )
    return spans


def _timeline_series(
    cycles: list[dict], selection, lead_rank: int, kind, field: str, t_first: int
) -> tuple[dict[str, tuple[list, list]], list]:
    """The lead rank's cycles as (seconds, ms) points: the main kind's, other kinds', those
    outside the measured window, and the stalls apart (x, ms, cycle)."""
    kept: set = set()
    stall_cycles: set = set()
    for p, st in zip(selection.procs, selection.stall_sets):
        if p.rank == lead_rank:
            kept |= {c["cycle"] for c in p.cycles}
            stall_cycles |= st
    series: dict[str, tuple[list, list]] = {"main": ([], []), "other": ([], []), "outside": ([], [])}
    stall_pts: list = []
    for c in cycles:
        x = (c["t0"] - t_first) / 1e9
        ms = (c[field] if c.get(field) is not None else c["host_ns"]) / 1e6
        if c["cycle"] in stall_cycles:
            stall_pts.append((x, ms, c))
            continue
        which = "outside" if c["cycle"] not in kept else "main" if cycle_kind(c) == kind else "other"
        series[which][0].append(x)
        series[which][1].append(ms)
    return series, stall_pts


def _stall_marks(ax, fig: SvgFigure, stall_pts: list) -> None:
    """A red circle on each stall (the first 300), and one legend entry for them all."""
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
