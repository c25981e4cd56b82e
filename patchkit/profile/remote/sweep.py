"""``profile.remote --matrix``: one server start per point of a matrix, inside one apply/revert.

    cfg = RemoteConfig.from_mapping({..., "matrix": "speculative-num-steps=1,2,3;"
                                     "speculative-num-draft-tokens=2,4;env:NCCL_PROTO=LL,Simple",
                                     "baseline": True})
    outcome = run_remote_sweep(cfg)     # outcome.rows, .best, .baseline, .run_dir

The flow: verify and apply the series on every target; then ``repeat`` repetitions (default
verdict.DEFAULT_REPEAT = 5); in each, every point (cartesian product, first key slowest) and,
with ``baseline``, the baseline as one more point, in rotated order: repetition r starts at
the r-th entry (A B C base, B C base A, C base A B, ...), so that no point is always the first
after a revert or the last of a drifting machine. Each (repetition, point) is its own server
start: the point's server command (each option key replaces or adds ``--KEY VALUE``, see
patchkit.profile.remote.server_args) and environment (``env:`` keys over the settings' env) go
through the same steps as a single profile.remote run -- start, /health, warm-up benchmark,
measured benchmark, stop, fetch -- with that run's report built at once in
``points/NN-label/`` (repetition 1) or ``points/NN-label/repR/``. The baseline (the server
without its --speculative-* options) runs on the reverted tree, in ``baseline/`` (``repR/``
below it): the series is reverted before its turn and applied again after it. A run that
fails (server exits, never healthy, benchmark fails, no cycle recorded) is recorded with its
error and the sweep goes on. The series is reverted in ``finally``: after the last run, on a
failure outside the runs, on Ctrl-C and on SIGTERM.

Each row keeps the keys of a single run (from its median repetition, whose folder ``report``
names) and gains ``tokens_per_s_median``, ``tokens_per_s_ci`` (95%, patchkit.profile.verdict),
``repeats`` (tok/s per repetition, None where it failed), ``reports`` and ``ratio_ci``;
``tokens_per_s`` is the median. sweep.json gains ``verdict`` (verdict.decide over the points:
best, significant, indistinguishable, method, alpha, plus p_values and ``cost``: server starts
and minutes) and ``order`` (the runs as they ran). sweep.json, sweep.md, sweep.txt and sweep.png
go to the run directory; an interrupted sweep still writes sweep.json/md/txt with the runs
done (``interrupted``: true).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patchkit.errors import PatchkitError
from patchkit.profile.default import new_run_dir
from patchkit.profile.progress import ProgressLine
from patchkit.profile.remote.config import RemoteConfig
from patchkit.profile.remote.run import RemoteRun, report_meta, run_baseline
from patchkit.profile.remote.server_args import expand_server_matrix
from patchkit.profile.site import ProfileError, _sigint_deferred, sigterm_interrupts
from patchkit.profile.sweep import _fmt, format_table, point_dir_name
from patchkit.profile.verdict import decide, describe, ratio_interval, rotation, summarize, title_line

SCHEMA = "patchkit.remote-sweep/1"


@dataclass
class RemoteSweepOutcome:
    run_dir: Path
    rows: list[dict]
    baseline: dict | None
    best: dict | None
    table: str
    elapsed_s: float
    files: dict = field(default_factory=dict)
    verdict: dict | None = None


BASELINE = "baseline"
MEASURED_KEYS = (
    "ok",
    "error",
    "tokens_per_s",
    "accept_length",
    "cycles",
    "top_level_share",
    "phase_shares",
    "cycle_ms",
    "basis",
    "worker",
)


def _row(index: int, point: dict) -> dict:
    return {
        "index": index + 1,
        "label": point["label"],
        "params": point["params"],
        "server_command": point["server_command"],
        "env": point["env"],
        "report": "points/" + point_dir_name(index, point["label"]),
        "ok": False,
        "error": None,
        "tokens_per_s": None,
        "ratio_to_baseline": None,
        "accept_length": None,
        "cycles": None,
        "top_level_share": None,
        "phase_shares": {},
        "cycle_ms": None,
        "basis": None,
        "worker": None,
        "tokens_per_s_median": None,
        "tokens_per_s_ci": None,
        "repeats": [],
        "ratio_ci": None,
        "reports": [],
        "runs": [],
    }


def rep_dir(base: str, rep: int) -> str:
    """A repetition's folder: the point's own for the first, ``repR`` below it after."""
    return base if rep == 0 else f"{base}/rep{rep + 1}"


def _measure(
    cfg: RemoteConfig, point: dict, row: dict, point_dir: Path, progress, transports, sweep_start: float
) -> None:
    """One run of a point: serve, benchmark, fetch, report; fills ``row`` (raises on failure)."""
    from patchkit.report import build_report

    run = RemoteRun(
        cfg,
        point_dir,
        progress,
        transports,
        server_command=point["server_command"],
        env=point["env"],
        apply=False,
    )
    try:
        bench, timing = run.execute()
    finally:
        row["worker"] = run.worker
    bench.write(point_dir)
    meta = report_meta(
        cfg,
        bench,
        run.hosts,
        time.monotonic() - sweep_start,
        server_command=point["server_command"],
        env=point["env"],
    )
    meta["sweep_point"] = point["label"]
    meta["worker"] = row["worker"]
    summary = build_report(timing, point_dir, meta=meta, chart=cfg.chart)
    dist = summary.cycle["dev_ms"] if summary.basis == "device" else summary.cycle["host_ms"]
    decode_cycle = summary.decode_cycle
    assert decode_cycle is not None, "build_report fills it"
    row.update(
        ok=True,
        tokens_per_s=bench.tokens_per_s,
        cycles=summary.cycle["count"],
        accept_length=bench.accept_length
        if bench.accept_length is not None
        else summary.decode.get("accept_length_mean"),
        top_level_share=decode_cycle["top_level_share"],
        basis=summary.basis,
        cycle_ms=dist["mean"] if dist else None,
        phase_shares=decode_cycle["phase_shares"],
    )
    if bench.tokens_per_s is None:
        row.update(ok=False, error=f"no output token throughput in {point_dir / 'benchmark.log'}")


def short_error(error: str | None) -> str:
    """One line: the error's first line (without the log-tail lead-in) and its last line."""
    lines = [ln for ln in (error or "").splitlines() if ln.strip()]
    if not lines:
        return "-"
    head = lines[0].split("; last lines of")[0]
    return head + (f" -- {lines[-1].strip()}" if len(lines) > 1 else "")


def _phase_names(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(n for r in rows for n in r["phase_shares"]))


def _ci(ci, spec: str = ".1f", suffix: str = "") -> str:
    return "-" if not ci else f"[{format(ci[0], spec)}, {format(ci[1], spec)}]{suffix}"


def _count(row: dict) -> str:
    reps = row.get("repeats") or []
    ok = sum(v is not None for v in reps)
    return "-" if not reps else (f"{ok}" if ok == len(reps) else f"{ok}/{len(reps)}")


def render_sweep(
    rows: list[dict],
    baseline: dict | None,
    best: dict | None,
    headline: str,
    markdown: bool = False,
    verdict: dict | None = None,
) -> str:
    """The sweep table. ``best`` is marked only when ``verdict`` (when given) is significant."""
    names = _phase_names(rows)
    columns = [
        "point",
        "tok/s",
        "95% CI",
        "n",
        "vs baseline",
        "ratio 95% CI",
        "accept len",
        "cycles",
        "top-level %",
    ] + [f"{n} %" for n in names]
    body, marks = [], []
    best_mark = None if verdict is not None and not verdict.get("significant") else best
    if baseline:
        body.append(
            tuple(
                [
                    "baseline (no speculation)",
                    _fmt(baseline.get("tokens_per_s"), ".1f"),
                    _ci(baseline.get("tokens_per_s_ci")),
                    _count(baseline),
                    "1.00x" if baseline.get("tokens_per_s") else "-",
                    "-",
                    _fmt(baseline.get("accept_length"), ".2f"),
                ]
                + ["-"] * (2 + len(names))
            )
        )
        marks.append(False)
    for r in rows:
        cells = [
            r["label"],
            _fmt(r["tokens_per_s"], ".1f") if r["ok"] else "failed",
            _ci(r.get("tokens_per_s_ci")),
            _count(r),
            _fmt(r["ratio_to_baseline"], ".2f", "x"),
            _ci(r.get("ratio_ci"), ".2f"),
            _fmt(r["accept_length"], ".2f"),
            _fmt(r["cycles"], "d"),
            _fmt(r["top_level_share"], ".1f", "%"),
        ]
        cells += [_fmt(r["phase_shares"].get(n), ".1f") for n in names]
        body.append(tuple(cells))
        marks.append(best_mark is not None and r is best_mark)
    lines = format_table(columns, body, marks, headline, markdown, title="profile.remote sweep")
    lines.append("")
    if best is not None:
        ratio = (
            f", {best['ratio_to_baseline']:.2f}x the baseline"
            if best["ratio_to_baseline"] is not None
            else ""
        )
        what = "best" if best_mark is not None else "top (not a verdict)"
        lines.append(
            f"{what}: {best['label']} -- {best['tokens_per_s']:.1f} tok/s{ratio}, "
            f"accept length {_fmt(best['accept_length'], '.2f')}"
        )
    if verdict is not None:
        lines.append(describe(verdict))
        cost = verdict.get("cost") or {}
        if cost:
            lines.append(
                f"verdict cost: {cost['server_starts']} server start(s) "
                f"({cost['runs']} run(s) x {cost['targets']} target(s), "
                f"{cost['repeat']} repetition(s)), {cost['minutes']:.1f} min"
            )
    if baseline and baseline.get("error"):
        lines.append(f"baseline failed: {baseline['error']}")
    failed = [r for r in rows if not r["ok"]]
    if failed:
        lines.append(f"failed points ({len(failed)}):")
        lines += [f"  {r['label']}: {short_error(r['error'])}" for r in failed]
    partly = [r for r in rows if r["ok"] and r.get("error")]
    if partly:
        lines.append(f"points with failed repetitions ({len(partly)}):")
        lines += [f"  {r['label']}: {short_error(r['error'])}" for r in partly]
    basis = next((r["basis"] for r in rows if r["basis"]), "host")
    lines.append(
        f"tok/s: median of the repetitions, 95% CI of the geometric mean (t on log "
        f"tok/s); ratio: medians, 95% Welch interval; phase shares: % of the decode "
        f"cycle ({basis} time) in the median repetition; tok/s and accept length: "
        "the benchmark's output"
    )
    return "\n".join(lines) + "\n"


def _write(
    run_dir: Path,
    cfg: RemoteConfig,
    rows,
    baseline,
    best,
    elapsed: float,
    *,
    interrupted: bool,
    chart: bool,
    verdict: dict | None = None,
    order: list | None = None,
) -> tuple[str, dict]:
    ok = [r for r in rows if r["ok"]]
    headline = (
        f"sweep: {len(rows)} point(s), {len(ok)} measured"
        f"{', baseline' if baseline else ''}, {cfg.repeats} repetition(s) in rotated "
        f"order; series {Path(cfg.series).name}; targets {', '.join(cfg.targets)}"
        + ("; INTERRUPTED" if interrupted else "")
    )
    table = render_sweep(rows, baseline, best, headline, verdict=verdict)
    (run_dir / "sweep.txt").write_text(table, encoding="utf-8")
    (run_dir / "sweep.md").write_text(
        render_sweep(rows, baseline, best, headline, markdown=True, verdict=verdict), encoding="utf-8"
    )
    files = {"json": "sweep.json", "markdown": "sweep.md", "table": "sweep.txt"}
    significant = bool(verdict and verdict.get("significant"))
    if chart and rows:
        from patchkit.report.chart import write_sweep_chart

        write_sweep_chart(
            rows,
            run_dir / "sweep.png",
            best_label=best["label"] if best and significant else None,
            baseline_tokens_per_s=(baseline or {}).get("tokens_per_s"),
            baseline_ci=(baseline or {}).get("tokens_per_s_ci"),
            title=f"profile.remote sweep: {len(ok)}/{len(rows)} point(s) x "
            f"{cfg.repeats}, series {Path(cfg.series).name}\n" + (title_line(verdict) if verdict else ""),
        )
        files["chart"] = "sweep.png"
    doc = {
        "schema": SCHEMA,
        "matrix": cfg.matrix,
        "series": cfg.series,
        "targets": cfg.targets,
        "server_command": cfg.server_command,
        "bench_command": cfg.bench_command,
        "env": cfg.env,
        "baseline": baseline,
        "best": best["label"] if best else None,
        "rows": rows,
        "interrupted": interrupted,
        "wall_s": elapsed,
        "files": files,
        "repeat": cfg.repeats,
        "warmup": cfg.warmup,
        "verdict": verdict,
        "order": order or [],
    }
    (run_dir / "sweep.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return table, files


def _fold_baseline(runs: list[dict]) -> dict | None:
    """The baseline's repetitions as one summary.json-style "baseline" document."""
    if not runs:
        return None
    good = [r for r in runs if r["error"] is None and r["tokens_per_s"] is not None]
    ranked = sorted(good, key=lambda r: r["tokens_per_s"])
    doc: dict[str, Any] = dict(ranked[(len(ranked) - 1) // 2] if ranked else runs[0])
    doc.update(summarize([r["tokens_per_s"] if r in good else None for r in runs]))
    doc["reports"] = [r["report"] for r in runs]
    doc["tokens_per_s"] = doc["tokens_per_s_median"]
    errors = [f"{r['report']}: {r['error']}" for r in runs if r not in good]
    doc["error"] = None if good else "; ".join(errors)
    doc["errors"] = errors
    return doc


def _fold_point(row: dict) -> None:
    """A point's repetitions into its row: the median run's fields, the intervals."""
    runs = row["runs"]
    good = [r for r in runs if r["ok"]]
    row.update(summarize([r["tokens_per_s"] if r["ok"] else None for r in runs]))
    row["reports"] = [r["report"] for r in runs]
    errors = [f"{r['report']}: {r['error']}" for r in runs if not r["ok"] and r["error"]]
    if good:
        ranked = sorted(good, key=lambda r: r["tokens_per_s"])
        median_run = ranked[(len(ranked) - 1) // 2]
        row.update({k: median_run[k] for k in MEASURED_KEYS})
        row["report"] = median_run["report"]
        row["tokens_per_s"] = row["tokens_per_s_median"]
        row["error"] = "; ".join(errors) or None
    elif runs:
        last = runs[-1]
        row.update({k: last[k] for k in MEASURED_KEYS})
        row["ok"] = False
        row["error"] = "; ".join(errors) or last["error"]


def _run_point(cfg, point, row, rep, run_dir, progress, transports, start, bracket) -> None:
    run: dict[str, Any] = {k: None for k in MEASURED_KEYS}
    run.update(ok=False, phase_shares={}, rep=rep + 1, report=rep_dir(row["reports_base"], rep))
    row["runs"].append(run)
    point_dir = run_dir / run["report"]
    point_dir.mkdir(parents=True, exist_ok=True)
    try:
        _measure(cfg, point, run, point_dir, progress, transports, start)
    except PatchkitError as exc:
        run["error"] = exc.message
        bracket.log(f"point {point['label']} (repetition {rep + 1}) failed: {exc.message}")


def run_remote_sweep(
    cfg: RemoteConfig, *, stream=None, progress: ProgressLine | None = None, transports=None
) -> RemoteSweepOutcome:
    """The sweep (module docstring). Raises ProfileError when every point failed or the revert
    failed; KeyboardInterrupt (Terminated for SIGTERM) after the revert when interrupted."""
    from patchkit.transport import parse_target

    out = stream or sys.stdout
    start = time.monotonic()
    if cfg.chart:  # phases.png and sweep.png: said before a target is touched
        from patchkit.extras import require

        require("report", "profile.remote", instead="or give --no-chart")
    assert isinstance(cfg.matrix, dict), "RemoteConfig parsed --matrix (callers check it is given)"
    points = expand_server_matrix(cfg.matrix, cfg.server_command, cfg.env)
    transports = transports or [parse_target(spec, **cfg.transport_options()) for spec in cfg.targets]
    run_dir = new_run_dir(cfg.out)
    progress = progress or ProgressLine(prefix="profile")
    rows = [_row(i, p) for i, p in enumerate(points)]
    for row in rows:
        row["reports_base"] = row["report"]
    entries = list(range(len(points))) + ([BASELINE] if cfg.baseline else [])
    schedule = rotation(entries, cfg.repeats)
    base_runs: list[dict] = []
    order: list[dict] = []
    baseline, failure, interrupted = None, None, False
    bracket = RemoteRun(cfg, run_dir, progress, transports)  # verify, apply ... revert
    with sigterm_interrupts():
        try:
            try:
                also = " and the baseline" if cfg.baseline else ""
                bracket.log(
                    f"sweep of {len(points)} point(s){also}, {cfg.repeats} "
                    "repetition(s), rotated: " + ", ".join(p["label"] for p in points)
                )
                for n, (rep, entry) in enumerate(schedule):
                    label = BASELINE if entry == BASELINE else points[entry]["label"]
                    order.append({"rep": rep + 1, "label": label})
                    bracket.log(f"run {n + 1}/{len(schedule)} (repetition {rep + 1}/{cfg.repeats}): {label}")
                    if entry == BASELINE:
                        problems = bracket.revert_series()
                        if problems:
                            raise ProfileError("; ".join(problems))
                        doc = run_baseline(
                            cfg, run_dir, progress, transports, None, sub=rep_dir(BASELINE, rep)
                        )
                        base_runs.append(doc)
                        continue
                    if not bracket.applied:
                        bracket.verify_and_apply()
                    _run_point(
                        cfg, points[entry], rows[entry], rep, run_dir, progress, transports, start, bracket
                    )
            finally:
                with _sigint_deferred():
                    problems = bracket.cleanup()
                    bracket.record()
                    progress.close()
            if problems:
                raise ProfileError("; ".join(problems))
        except KeyboardInterrupt:
            interrupted = True
            raise
        except BaseException as exc:  # no sweep files for a sweep that never ran
            failure = exc
            raise
        finally:
            ran = any(r["runs"] for r in rows) or bool(base_runs)
            if failure is not None and ran:  # e.g. applying again after the baseline failed
                interrupted = True
                for row in rows:
                    if not row["runs"]:
                        row["error"] = f"not run (the sweep stopped: {failure})"
            if failure is None or ran:
                for row in rows:
                    row.pop("reports_base", None)
                    _fold_point(row)
                    if not row["ok"] and row["error"] is None:
                        row["error"] = "not run (interrupted)"
                baseline = _fold_baseline(base_runs)
                verdict = _verdict(rows, cfg, len(order), len(transports), time.monotonic() - start)
                best = _finish(rows, baseline, verdict["top"])
                with _sigint_deferred():
                    table, files = _write(
                        run_dir,
                        cfg,
                        rows,
                        baseline,
                        best,
                        time.monotonic() - start,
                        interrupted=interrupted,
                        chart=cfg.chart and not interrupted,
                        verdict=verdict,
                        order=order,
                    )
    print(table, file=out)
    print(f"sweep: {run_dir}/ ({', '.join(files.values())}, points/*/)", file=out)
    outcome = RemoteSweepOutcome(
        run_dir, rows, baseline, best, table, time.monotonic() - start, files, verdict
    )
    if not any(r["ok"] for r in rows):
        raise ProfileError(
            f"every point of the sweep failed (see {run_dir / 'sweep.md'}): "
            + "; ".join(f"{r['label']}: {r['error']}" for r in rows)
        )
    if baseline and baseline["error"]:
        raise ProfileError(
            f"the baseline run failed: {baseline['error']} (the sweep's report is in {run_dir}/)"
        )
    return outcome


def _verdict(rows: list[dict], cfg: RemoteConfig, runs: int, targets: int, elapsed_s: float) -> dict:
    verdict = decide({r["label"]: [v for v in r["repeats"] if v is not None] for r in rows if r["ok"]})
    verdict["cost"] = {
        "runs": runs,
        "targets": targets,
        "server_starts": runs * targets,
        "repeat": cfg.repeats,
        "warmup": cfg.warmup,
        "minutes": elapsed_s / 60,
    }
    return verdict


def _finish(rows: list[dict], baseline: dict | None, top: str | None = None) -> dict | None:
    """Ratios to the baseline (medians; interval from the repetitions) and the top point (the
    verdict's: highest mean log tok/s; else the highest median); the verdict says whether it
    is significantly best."""
    base = (baseline or {}).get("tokens_per_s")
    base_reps = [v for v in (baseline or {}).get("repeats") or [] if v is not None]
    for r in rows:
        if r["ok"] and base:
            r["ratio_to_baseline"] = r["tokens_per_s"] / base
            r["ratio_ci"] = ratio_interval([v for v in r["repeats"] if v is not None], base_reps)
    ranked = [r for r in rows if r["ok"]]
    best = next((r for r in ranked if r["label"] == top), None) or (
        max(ranked, key=lambda r: r["tokens_per_s"]) if ranked else None
    )
    if baseline and best:
        baseline["spec_tokens_per_s"] = best["tokens_per_s"]
        baseline["ratio"] = best["ratio_to_baseline"]
        baseline["ratio_ci"] = best["ratio_ci"]
    return best
