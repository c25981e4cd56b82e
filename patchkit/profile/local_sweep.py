"""``profile.sweep``: one profile run per point of a matrix, plus the baseline, in one table.

    from patchkit.profile import run_sweep, parse_matrix
    run_sweep("profile-out", size="ci",
              matrix=parse_matrix("num_assistant_tokens=2,4,8;assistant_confidence_threshold=0,0.4"))

All points run in one workload process on the same models, inside one apply/revert bracket.
For every prompt the plain generation runs right before the assisted one, so each point has
its own baseline measured under the same load; the ratio in the table is to that baseline,
and the baseline row shows all baseline runs pooled.

``repeat`` (default patchkit.settings.SWEEP_REPEAT; ``--repeat N``) measured passes per point, in rotated order
(repetition r starts at the r-th point: A B C, B C A, C A B), each with its own timing folder
and report (``points/<NN-label>/`` for the first, ``points/<NN-label>/repR/`` after) and its
own window.json; with ``warmup`` (default) each point's first pass is preceded by a warm-up
(workload.py). A row's tokens_per_s / baseline_tokens_per_s / ratio / shares are those of its
repetition with the median ratio (``report`` names its folder); it gains
``tokens_per_s_median``, ``tokens_per_s_ci`` and ``repeats`` (assisted tok/s per repetition),
``ratios`` and ``ratio_ci`` (95% t-interval of the paired per-repetition ratios, log scale).
The verdict (patchkit.profile.verdict.decide_fixed) compares the points' per-repetition ratios to
their interleaved baselines (paired, so drift between passes cancels); ``best`` names the top
point (highest mean log ratio), ``verdict.best`` only a significant one. sweep.json, sweep.md,
sweep.txt and, with the chart, report.html (the sweep's page, linking each point's) go next
to the points.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patchkit.errors import InvalidInput
from patchkit.profile.local_run import (
    check_args,
    marks_partial,
    new_run_dir,
    progress_log,
    report_meta,
    write_pass_window,
)
from patchkit.profile.progress import ProgressLine
from patchkit.profile.session import run_workload
from patchkit.profile.site import DEFAULT_SERIES, DEFAULT_SITE, ensure_site, patched
from patchkit.profile.verdict import decide_fixed, describe, interval, repetition_fields, rotation
from patchkit.settings import PROFILE_DEFAULTS, SWEEP_REPEAT, checked

# matrix keys: canonical name -> (short label, parser)
KEYS = {
    "num_assistant_tokens": ("k", int),
    "assistant_confidence_threshold": ("conf", float),
    "schedule": ("schedule", str),
}
ALIASES = {
    "k": "num_assistant_tokens",
    "num_assistant_tokens": "num_assistant_tokens",
    "conf": "assistant_confidence_threshold",
    "assistant_confidence_threshold": "assistant_confidence_threshold",
    "schedule": "schedule",
    "num_assistant_tokens_schedule": "schedule",
}
SCHEDULES = ("constant", "heuristic", "heuristic_transient")
SWEEP_SCHEMA = "patchkit.sweep/1"
DEFAULT_REPEAT = SWEEP_REPEAT  # passes in one warm process: less spread than server starts


@dataclass
class SweepOutcome:
    run_dir: Path
    rows: list[dict]
    baseline: dict
    best: dict | None
    table: str
    workload: dict
    elapsed_s: float
    files: dict = field(default_factory=dict)


def parse_matrix(text: str) -> dict[str, list]:
    """``"num_assistant_tokens=2,4,8;assistant_confidence_threshold=0,0.4"`` → dict of lists."""
    matrix: dict[str, list] = {}
    for part in filter(None, (p.strip() for p in re.split(r"[;\n]", text or ""))):
        key, sep, values = part.partition("=")
        key = ALIASES.get(key.strip())
        if not sep or key is None:
            raise InvalidInput(f"--matrix: {part!r} is not KEY=V1,V2,... with KEY one of {', '.join(KEYS)}")
        _, kind = KEYS[key]
        try:
            matrix[key] = [kind(v.strip()) for v in values.split(",") if v.strip()]
        except ValueError as exc:
            raise InvalidInput(f"--matrix: {part!r}: {exc}") from exc
    return validate_matrix(matrix)


def validate_matrix(matrix: dict) -> dict[str, list]:
    if not matrix:
        raise InvalidInput("--matrix: empty; e.g. num_assistant_tokens=2,4,8")
    out = {}
    for key, values in matrix.items():
        key = ALIASES.get(key)
        if key is None:
            raise InvalidInput(f"--matrix: unknown key; use {', '.join(KEYS)}")
        values = list(values)
        if not values:
            raise InvalidInput(f"--matrix: {key} has no values")
        if key == "num_assistant_tokens" and any(int(v) < 1 for v in values):
            raise InvalidInput("--matrix: num_assistant_tokens values must be at least 1")
        if key == "assistant_confidence_threshold" and any(not 0 <= float(v) < 1 for v in values):
            raise InvalidInput("--matrix: assistant_confidence_threshold values must be in [0, 1)")
        if key == "schedule" and any(v not in SCHEDULES for v in values):
            raise InvalidInput(f"--matrix: schedule must be one of {', '.join(SCHEDULES)}")
        out[key] = values
    return out


def expand(matrix: dict[str, list]) -> list[dict]:
    """The points of the matrix (cartesian product), each with a short label."""
    keys = list(matrix)
    points = []
    for combo in itertools.product(*(matrix[k] for k in keys)):
        params = {"num_assistant_tokens": 4, "assistant_confidence_threshold": 0.0, "schedule": "constant"}
        params.update(dict(zip(keys, combo)))
        label = " ".join(
            f"{KEYS[k][0]}={v:g}" if isinstance(v, float) else f"{KEYS[k][0]}={v}"
            for k, v in zip(keys, combo)
        )
        points.append({"label": label, **params})
    return points


def _share(summary, name: str):
    entry = summary.phase(name)
    return entry["share_of_cycle"] if entry else None


def _row(point: dict, summary) -> dict:
    spec, base = point["assisted"]["tokens_per_s"], point["baseline"]["tokens_per_s"]
    basis_dist = summary.cycle["dev_ms"] if summary.basis == "device" else summary.cycle["host_ms"]
    return {
        "label": point["label"],
        "params": point["params"],
        "tokens_per_s": spec,
        "baseline_tokens_per_s": base,
        "ratio": spec / base if spec and base else None,
        "accept_length": point["accept_length"],
        "verify_share": _share(summary, "verify"),
        "draft_share": _share(summary, "draft"),
        "cycle_ms": basis_dist["mean"] if basis_dist else None,
        "basis": summary.basis,
        "identical_outputs": f"{point['identical_outputs']}/{point['prompts']}",
        "report": _relative(point["report_dir"]),
    }


def _relative(report_dir) -> str:
    """``points/NN-label`` or ``points/NN-label/repR``: the folder below the run directory."""
    parts = Path(report_dir).parts
    return "/".join(parts[len(parts) - 1 - parts[::-1].index("points") :])


def _fmt(value, spec: str, suffix: str = "") -> str:
    return "-" if value is None else format(value, spec) + suffix


COLUMNS = (
    "point",
    "tok/s",
    "95% CI",
    "vs baseline",
    "ratio 95% CI",
    "n",
    "accept len",
    "verify %",
    "draft %",
    "cycle ms",
    "identical",
)


def _ci(ci, spec: str) -> str:
    return "-" if not ci else f"[{format(ci[0], spec)}, {format(ci[1], spec)}]"


def _cells(row: dict) -> tuple:
    reps = row.get("repeats") or []
    return (
        row["label"],
        _fmt(row["tokens_per_s"], ".1f"),
        _ci(row.get("tokens_per_s_ci"), ".1f"),
        _fmt(row.get("ratio"), ".2f", "x"),
        _ci(row.get("ratio_ci"), ".2f"),
        str(len(reps)) if reps else "-",
        _fmt(row.get("accept_length"), ".2f"),
        _fmt(row.get("verify_share"), ".1f", "%"),
        _fmt(row.get("draft_share"), ".1f", "%"),
        _fmt(row.get("cycle_ms"), ".2f"),
        row.get("identical_outputs", "-"),
    )


def format_table(
    columns,
    body: list[tuple],
    marks: list[bool],
    headline: str,
    markdown: bool = False,
    title: str = "profile sweep",
) -> list[str]:
    """Rows of cells as an aligned text table (marked rows start with ``*``) or as markdown
    (marked rows in bold); shared by the local and the remote sweep."""
    if markdown:
        lines = [
            f"# {title}\n\n{headline}\n",
            "| " + " | ".join(columns) + " |",
            "|" + "|".join(["---"] + ["---:"] * (len(columns) - 1)) + "|",
        ]
        for cells, mark in zip(body, marks):
            shown = [f"**{c}**" if mark else c for c in cells]
            lines.append("| " + " | ".join(shown) + " |")
        return lines
    labels = [("* " if m else "  ") + c[0] for c, m in zip(body, marks)]
    body = [(lab,) + tuple(c[1:]) for lab, c in zip(labels, body)]
    head = ("  " + columns[0],) + tuple(columns[1:])
    widths = [max(len(r[i]) for r in body + [head]) for i in range(len(head))]
    fmt = "  ".join(["{:<%d}" % widths[0]] + ["{:>%d}" % w for w in widths[1:]])
    return [headline, fmt.format(*head), "  ".join("-" * w for w in widths)] + [fmt.format(*r) for r in body]


def point_dir_name(index: int, label: str) -> str:
    """``03-k4_conf0.5``: the folder of a point's report under ``points/``."""
    slug = re.sub(r"[^A-Za-z0-9.=_-]+", "_", label).replace("=", "")
    return f"{index + 1:02d}-{slug}"


def render(
    rows: list[dict],
    baseline: dict,
    best: dict | None,
    headline: str,
    markdown: bool = False,
    verdict: dict | None = None,
) -> str:
    """The table; ``best`` is marked unless ``verdict`` (when given) is not significant."""
    mark = None if verdict is not None and not verdict.get("significant") else best
    base_row = {
        "label": "baseline (no assistant)",
        "tokens_per_s": baseline["tokens_per_s"],
        "ratio": 1.0,
        "tokens_per_s_ci": baseline.get("tokens_per_s_ci"),
        "repeats": baseline.get("repeats"),
    }
    body = [_cells(base_row)] + [_cells(r) for r in rows]
    marks = [False] + [mark is not None and r is mark for r in rows]
    lines = format_table(COLUMNS, body, marks, headline, markdown)
    lines.append("")
    if best is not None:
        what = "best" if mark is not None else "top (not a verdict)"
        lines.append(
            f"{what}: {best['label']} -- {best['ratio']:.2f}x its baseline, "
            f"{best['tokens_per_s']:.1f} tok/s, accepted length "
            f"{_fmt(best['accept_length'], '.2f')}"
        )
    if verdict is not None:
        lines.append(describe(verdict) + " (on the ratios to the interleaved baselines)")
        cost = verdict.get("cost") or {}
        if cost:
            lines.append(
                f"verdict cost: {cost['runs']} measured pass(es) in one workload "
                f"process ({cost['repeat']} repetition(s)), {cost['minutes']:.1f} min"
            )
    basis = rows[0]["basis"] if rows else "host"
    lines.append(
        f"shares and cycle times: {basis} time; ratio: to the baseline runs "
        "interleaved with that point's (same prompts, same load)"
        + (
            "; row values: the repetition with the median ratio, 95% CI: t on logs"
            if any(len(r.get("repeats") or []) > 1 for r in rows)
            else ""
        )
    )
    return "\n".join(lines) + "\n"


@marks_partial
def run_sweep(
    out_root=PROFILE_DEFAULTS["out"],
    size: str = PROFILE_DEFAULTS["size"],
    matrix: dict | str | None = None,
    *,
    series_dir=DEFAULT_SERIES,
    site=DEFAULT_SITE,
    seed: int = PROFILE_DEFAULTS["seed"],
    timer_mode: str | None = None,
    device: str = PROFILE_DEFAULTS["device"],
    wheelhouse=None,
    timeout: float | None = None,
    chart: bool = True,
    stream=None,
    workload=None,
    repeat: int | None = None,
    warmup: bool = PROFILE_DEFAULTS["warmup"],
) -> SweepOutcome:
    """Sweep the matrix (default: patchkit.profile.matrix's, the option table) on the default
    target, ``repeat`` passes per point (default SWEEP_REPEAT) in rotated order."""
    check_args(size, timer_mode, device=device)
    if workload is None:  # the real workload imports torch & co. in this interpreter
        from patchkit.extras import require

        require("profile", "profile.sweep")
    repeat = checked("profile.sweep", "repeat", DEFAULT_REPEAT if repeat is None else repeat)
    if not isinstance(matrix, str) and not matrix:  # the default points: --matrix's default text
        matrix = PROFILE_DEFAULTS["matrix"]
    matrix = parse_matrix(matrix) if isinstance(matrix, str) else validate_matrix(matrix)
    out, log = progress_log(stream)
    start = time.monotonic()
    series_dir, site = Path(series_dir), Path(site)
    ensure_site(series_dir, site, wheelhouse=wheelhouse, log=log)  # a bad series: no run dir made
    run_dir = new_run_dir(out_root)
    points = expand(matrix)
    plan = _plan(points, run_dir, repeat)
    spec = _spec(points, plan, size=size, seed=seed, device=device, warmup=warmup)
    log(
        f"profile: sweep of {len(points)} points x {repeat} repetition(s), rotated: "
        f"{', '.join(p['label'] for p in points)}"
    )
    with patched(series_dir, site, log=log):
        result = (workload or run_workload)(
            site, spec, run_dir, timer_mode=timer_mode, timeout=timeout, progress=ProgressLine()
        )
    passes = result.get("passes") or [dict(p, rep=0, index=i) for i, p in enumerate(result["points"])]
    rows = _report_passes(plan, passes, result, run_dir, chart)
    baseline = _pooled_baseline(passes, repeat)
    verdict = _verdict(rows, len(passes), repeat, warmup, start)
    best = _best(rows, verdict)
    headline = _headline(len(rows), repeat, result)
    table = _write_tables(run_dir, rows, baseline, best, headline, verdict)
    elapsed = time.monotonic() - start
    doc = {
        "schema": SWEEP_SCHEMA,
        "matrix": matrix,
        "baseline": baseline,
        "rows": rows,
        "best": best["label"] if best else None,
        "device": result["device"],
        "model": result["model"],
        "size": result["size"],
        "wall_s": elapsed,
        "repeat": repeat,
        "warmup": bool(warmup),
        "verdict": verdict,
        "order": [{"rep": p["rep"] + 1, "label": points[p["point"]]["label"]} for p in plan],
    }
    files = _write_doc(run_dir, doc, table, chart)
    print(table, file=out)
    page = ", report.html" if "html" in files else ""
    print(f"sweep: {run_dir}/ (sweep.json, sweep.md{page}, points/*/)", file=out)
    return SweepOutcome(run_dir, rows, baseline, best, table, result, elapsed, files)


def _plan(points: list[dict], run_dir: Path, repeat: int) -> list[dict[str, Any]]:
    """The passes in rotated order, each with its report and timing folder (the first
    repetition in the point's folder, later ones in ``repR/`` under it); each point gains
    its own ``report_dir`` and ``timing_dir``."""
    for idx, point in enumerate(points):
        point["report_dir"] = str((run_dir / "points" / point_dir_name(idx, point["label"])).resolve())
        point["timing_dir"] = str(Path(point["report_dir"]) / "timing")
    plan: list[dict[str, Any]] = []
    for rep, idx in rotation(list(range(len(points))), repeat):
        report_dir = Path(points[idx]["report_dir"])
        report_dir = report_dir if rep == 0 else report_dir / f"rep{rep + 1}"
        plan.append(
            {
                "point": idx,
                "rep": rep,
                "report_dir": str(report_dir),
                "timing_dir": str(report_dir / "timing"),
            }
        )
    return plan


def _report_passes(
    plan: list[dict], passes: list[dict], result: dict, run_dir: Path, chart: bool
) -> list[dict]:
    """Each measured pass's window and report (the chart only for a point's first
    repetition), folded into one row per point."""
    from patchkit.report import build_report

    by_point: dict[int, list] = {}
    for step, measured in zip(plan, passes):
        report_dir = step["report_dir"]
        measured["report_dir"] = report_dir
        write_pass_window(measured, "profile.sweep")
        summary = build_report(
            measured["timing_dir"],
            report_dir,
            meta=report_meta(result, measured),
            chart=chart and step["rep"] == 0,
        )
        by_point.setdefault(step["point"], []).append(_row(measured, summary))
    return [_fold(by_point[i], run_dir) for i in sorted(by_point)]


def _pooled_baseline(passes: list[dict], repeat: int) -> dict:
    """The baseline row: every pass's baseline pooled, and tok/s per repetition."""
    base_reps = []
    for rep in range(repeat):
        in_rep = [p for p in passes if p.get("rep", 0) == rep]
        tok = sum(p["baseline"]["tokens"] for p in in_rep)
        sec = sum(p["baseline"]["seconds"] for p in in_rep)
        base_reps.append(tok / sec if sec else None)
    tokens = sum(p["baseline"]["tokens"] for p in passes)
    seconds = sum(p["baseline"]["seconds"] for p in passes)
    return {
        "tokens": tokens,
        "seconds": seconds,
        "tokens_per_s": tokens / seconds if seconds else None,
        **repetition_fields(base_reps),
    }


def _spec(points: list[dict], plan: list[dict], *, size: str, seed: int, device: str, warmup: bool) -> dict:
    """What the workload process runs: the models' size and seed, the points and the passes."""
    return {
        "size": size,
        "seed": seed,
        "device": device,
        "warmup": bool(warmup),
        "points": [{k: v for k, v in p.items() if k != "report_dir"} for p in points],
        "passes": [{k: v for k, v in p.items() if k != "report_dir"} for p in plan],
    }


def _verdict(rows: list[dict], runs: int, repeat: int, warmup: bool, start: float) -> dict:
    """decide_fixed over the points' per-repetition ratios to their interleaved baselines,
    with what the verdict cost (``start``: the sweep's time.monotonic())."""
    verdict = decide_fixed(
        {
            r["label"]: [x for x in r["ratios"] if x is not None]
            for r in rows
            if any(x is not None for x in r["ratios"])
        }
    )
    verdict["cost"] = {
        "runs": runs,
        "server_starts": 0,
        "workload_starts": 1,
        "repeat": repeat,
        "warmup": bool(warmup),
        "minutes": (time.monotonic() - start) / 60,
    }
    return verdict


def _best(rows: list[dict], verdict: dict) -> dict | None:
    """The verdict's top point, else the highest ratio; None without a ratio."""
    ranked = [r for r in rows if r["ratio"] is not None]
    return next((r for r in ranked if r["label"] == verdict["top"]), None) or (
        max(ranked, key=lambda r: r["ratio"]) if ranked else None
    )


def _headline(points: int, repeat: int, result: dict) -> str:
    m = result["model"]
    return (
        f"sweep: {points} points + baseline x {repeat} repetition(s) on "
        f"{result['device']}; random Llama "
        f"{m['layers']}x{m['hidden']} target, {m['draft_layers']}-layer shared draft, "
        f"{m['dtype']}, {m['prompts']} prompts x {m['new_tokens']} new tokens, greedy"
    )


def _write_tables(
    run_dir: Path, rows: list[dict], baseline: dict, best: dict | None, headline: str, verdict: dict
) -> str:
    """sweep.md and sweep.txt; the text table."""
    table = render(rows, baseline, best, headline, verdict=verdict)
    (run_dir / "sweep.md").write_text(
        render(rows, baseline, best, headline, markdown=True, verdict=verdict), encoding="utf-8"
    )
    (run_dir / "sweep.txt").write_text(table, encoding="utf-8")
    return table


def _write_doc(run_dir: Path, doc: dict, table: str, chart: bool) -> dict[str, str]:
    """sweep.json and, with the chart, the sweep's page (linking each point's); the files
    written beside it, by kind."""
    (run_dir / "sweep.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    files = {"json": "sweep.json", "markdown": "sweep.md", "table": "sweep.txt"}
    if chart:  # one page for the sweep, linking each point's
        from patchkit.report.html_sweep import write_sweep_page

        files["html"] = write_sweep_page(run_dir, json.loads(json.dumps(doc)), table).name
    return files


def _fold(runs: list[dict], run_dir: Path) -> dict:
    """A point's repetitions (rows of _row) as one row: the median-ratio repetition's values,
    the intervals over all of them."""
    ranked = sorted((r for r in runs if r["ratio"] is not None), key=lambda r: r["ratio"])
    row = dict(ranked[(len(ranked) - 1) // 2] if ranked else runs[0])
    row.update(repetition_fields([r["tokens_per_s"] for r in runs]))
    row["ratios"] = [r["ratio"] for r in runs]
    row["ratio_ci"] = interval([x for x in row["ratios"] if x is not None])
    row["reports"] = [r["report"] for r in runs]
    return row
