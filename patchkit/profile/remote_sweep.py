"""``profile.remote --matrix``: one server start per point of a matrix, inside one apply/revert.

    cfg = RemoteConfig.from_mapping({..., "matrix": "speculative-num-steps=1,2,3;"
                                     "speculative-num-draft-tokens=2,4;env:NCCL_PROTO=LL,Simple",
                                     "baseline": True})
    outcome = run_remote_sweep(cfg)     # outcome.rows, .best, .baseline, .run_dir

The flow: verify and apply the series once on every target; then for every point (cartesian
product, first key slowest) the point's server command (each option key replaces or adds
``--KEY VALUE``, see patchkit.profile.server_args) and environment (``env:`` keys over the
settings' env) go through the same steps as a single profile.remote run -- start, /health,
benchmark, stop, fetch -- with the point's report built at once in ``points/NN-label/``.
A point that fails (server exits, never healthy, benchmark fails, no cycle recorded) is
recorded with its error and the sweep goes on. The series is reverted in ``finally``: after
the last point, on a failure outside the points, on Ctrl-C and on SIGTERM. With ``baseline``
the server without its --speculative-* options then runs once on the reverted tree
(``baseline/``). sweep.json, sweep.md, sweep.txt and sweep.png go to the run directory; an
interrupted sweep still writes sweep.json/md/txt with the points done (``interrupted``: true).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from patchkit.errors import PatchkitError
from patchkit.profile.default import new_run_dir
from patchkit.profile.progress import ProgressLine
from patchkit.profile.remote import RemoteRun, count_cycles, report_meta, run_baseline
from patchkit.profile.remote_config import RemoteConfig
from patchkit.profile.server_args import expand_server_matrix
from patchkit.profile.site import ProfileError, _sigint_deferred, sigterm_interrupts
from patchkit.profile.sweep import _fmt, format_table, point_dir_name

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


def _row(index: int, point: dict) -> dict:
    return {"index": index + 1, "label": point["label"], "params": point["params"],
            "server_command": point["server_command"], "env": point["env"],
            "report": "points/" + point_dir_name(index, point["label"]),
            "ok": False, "error": None, "tokens_per_s": None, "ratio_to_baseline": None,
            "accept_length": None, "cycles": None, "top_level_share": None,
            "phase_shares": {}, "cycle_ms": None, "basis": None, "worker": None}


def _measure(cfg: RemoteConfig, point: dict, row: dict, point_dir: Path, progress, transports,
             sweep_start: float) -> None:
    """One point: serve, benchmark, fetch, report; fills ``row`` (raises on failure)."""
    from patchkit.report import build_report

    run = RemoteRun(cfg, point_dir, progress, transports, server_command=point["server_command"],
                    env=point["env"], apply=False)
    try:
        bench, timing = run.execute()
    finally:
        row["worker"] = run.worker
    (point_dir / "benchmark.json").write_text(json.dumps(bench.to_dict(), indent=2) + "\n",
                                              encoding="utf-8")
    meta = report_meta(cfg, bench, run.hosts, time.monotonic() - sweep_start,
                       server_command=point["server_command"], env=point["env"])
    meta["sweep point"] = point["label"]
    meta["speculative worker (server log)"] = row["worker"]
    summary = build_report(timing, point_dir, meta=meta, chart=cfg.chart)
    dist = summary.cycle["dev_ms"] if summary.basis == "device" else summary.cycle["host_ms"]
    row.update(
        ok=True, tokens_per_s=bench.tokens_per_s, cycles=count_cycles(timing),
        accept_length=bench.accept_length if bench.accept_length is not None
        else summary.decode.get("accept_length_mean"),
        top_level_share=summary.decode_cycle["top_level_share"], basis=summary.basis,
        cycle_ms=dist["mean"] if dist else None,
        phase_shares=summary.decode_cycle["phase_shares"])
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


def render_sweep(rows: list[dict], baseline: dict | None, best: dict | None, headline: str,
                 markdown: bool = False) -> str:
    names = _phase_names(rows)
    columns = ["point", "tok/s", "vs baseline", "accept len", "cycles", "top-level %"] + [
        f"{n} %" for n in names]
    body, marks = [], []
    if baseline:
        body.append(tuple(["baseline (no speculation)", _fmt(baseline.get("tokens_per_s"), ".1f"),
                           "1.00x" if baseline.get("tokens_per_s") else "-",
                           _fmt(baseline.get("accept_length"), ".2f")] + ["-"] * (2 + len(names))))
        marks.append(False)
    for r in rows:
        cells = [r["label"], _fmt(r["tokens_per_s"], ".1f") if r["ok"] else "failed",
                 _fmt(r["ratio_to_baseline"], ".2f", "x"), _fmt(r["accept_length"], ".2f"),
                 _fmt(r["cycles"], "d"), _fmt(r["top_level_share"], ".1f", "%")]
        cells += [_fmt(r["phase_shares"].get(n), ".1f") for n in names]
        body.append(tuple(cells))
        marks.append(best is not None and r is best)
    lines = format_table(columns, body, marks, headline, markdown, title="profile.remote sweep")
    lines.append("")
    if best is not None:
        ratio = (f", {best['ratio_to_baseline']:.2f}x the baseline"
                 if best["ratio_to_baseline"] is not None else "")
        lines.append(f"best: {best['label']} -- {best['tokens_per_s']:.1f} tok/s{ratio}, "
                     f"accept length {_fmt(best['accept_length'], '.2f')}")
    if baseline and baseline.get("error"):
        lines.append(f"baseline failed: {baseline['error']}")
    failed = [r for r in rows if not r["ok"]]
    if failed:
        lines.append(f"failed points ({len(failed)}):")
        lines += [f"  {r['label']}: {short_error(r['error'])}" for r in failed]
    basis = next((r["basis"] for r in rows if r["basis"]), "host")
    lines.append(f"phase shares: % of the decode cycle ({basis} time); tok/s and accept length: "
                 "the benchmark's output")
    return "\n".join(lines) + "\n"


def _write(run_dir: Path, cfg: RemoteConfig, rows, baseline, best, elapsed: float, *,
           interrupted: bool, chart: bool) -> tuple[str, dict]:
    ok = [r for r in rows if r["ok"]]
    headline = (f"sweep: {len(rows)} point(s), {len(ok)} measured"
                f"{', baseline' if baseline else ''}; series {Path(cfg.series).name}; "
                f"targets {', '.join(cfg.targets)}" + ("; INTERRUPTED" if interrupted else ""))
    table = render_sweep(rows, baseline, best, headline)
    (run_dir / "sweep.txt").write_text(table, encoding="utf-8")
    (run_dir / "sweep.md").write_text(render_sweep(rows, baseline, best, headline, markdown=True),
                                      encoding="utf-8")
    files = {"json": "sweep.json", "markdown": "sweep.md", "table": "sweep.txt"}
    if chart and rows:
        from patchkit.report.chart import write_sweep_chart

        write_sweep_chart(rows, run_dir / "sweep.png", best_label=best["label"] if best else None,
                          baseline_tokens_per_s=(baseline or {}).get("tokens_per_s"),
                          title=f"profile.remote sweep: {len(ok)} of {len(rows)} point(s) "
                                f"measured, series {Path(cfg.series).name}")
        files["chart"] = "sweep.png"
    doc = {"schema": SCHEMA, "matrix": cfg.matrix, "series": cfg.series,
           "targets": cfg.targets, "server_command": cfg.server_command,
           "bench_command": cfg.bench_command, "env": cfg.env, "baseline": baseline,
           "best": best["label"] if best else None, "rows": rows, "interrupted": interrupted,
           "wall_s": elapsed, "files": files}
    (run_dir / "sweep.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return table, files


def run_remote_sweep(cfg: RemoteConfig, *, stream=None, progress: ProgressLine | None = None,
                     transports=None) -> RemoteSweepOutcome:
    """The sweep (module docstring). Raises ProfileError when every point failed or the revert
    failed; KeyboardInterrupt (Terminated for SIGTERM) after the revert when interrupted."""
    from patchkit.transport import parse_target

    out = stream or sys.stdout
    start = time.monotonic()
    points = expand_server_matrix(cfg.matrix, cfg.server_command, cfg.env)
    transports = transports or [parse_target(spec, **cfg.transport_options())
                                for spec in cfg.targets]
    run_dir = new_run_dir(cfg.out)
    progress = progress or ProgressLine(prefix="profile")
    rows = [_row(i, p) for i, p in enumerate(points)]
    baseline, failure, interrupted = None, None, False
    bracket = RemoteRun(cfg, run_dir, progress, transports)  # verify, apply ... revert
    with sigterm_interrupts():
        try:
            try:
                bracket.verify_and_apply()
                bracket.log(f"sweep of {len(points)} point(s): "
                            + ", ".join(p["label"] for p in points))
                for i, (point, row) in enumerate(zip(points, rows)):
                    bracket.log(f"point {i + 1}/{len(points)}: {point['label']}")
                    point_dir = run_dir / row["report"]
                    point_dir.mkdir(parents=True, exist_ok=True)
                    try:
                        _measure(cfg, point, row, point_dir, progress, transports, start)
                    except PatchkitError as exc:
                        row["error"] = exc.message
                        bracket.log(f"point {point['label']} failed: {exc.message}")
            finally:
                with _sigint_deferred():
                    problems = bracket.cleanup()
                    bracket.record()
                    progress.close()
            if problems:
                raise ProfileError("; ".join(problems))
            if cfg.baseline:  # after the revert: the tree is pristine again
                baseline = run_baseline(cfg, run_dir, progress, transports, None)
        except KeyboardInterrupt:
            interrupted = True
            raise
        except BaseException as exc:  # noqa: B036 -- no sweep files for a sweep that never ran
            failure = exc
            raise
        finally:
            if failure is None:
                for r in rows:
                    if not r["ok"] and r["error"] is None:
                        r["error"] = "not run (interrupted)"
                best = _finish(rows, baseline)
                with _sigint_deferred():
                    table, files = _write(run_dir, cfg, rows, baseline, best,
                                          time.monotonic() - start, interrupted=interrupted,
                                          chart=cfg.chart and not interrupted)
    print(table, file=out)
    print(f"sweep: {run_dir}/ ({', '.join(files.values())}, points/*/)", file=out)
    outcome = RemoteSweepOutcome(run_dir, rows, baseline, best, table,
                                 time.monotonic() - start, files)
    if not any(r["ok"] for r in rows):
        raise ProfileError(f"every point of the sweep failed (see {run_dir / 'sweep.md'}): "
                           + "; ".join(f"{r['label']}: {r['error']}" for r in rows))
    if baseline and baseline["error"]:
        raise ProfileError(f"the baseline run failed: {baseline['error']} (the sweep's "
                           f"report is in {run_dir}/)")
    return outcome


def _finish(rows: list[dict], baseline: dict | None) -> dict | None:
    """Ratios to the baseline and the best point (highest tokens/s among measured points)."""
    base = (baseline or {}).get("tokens_per_s")
    for r in rows:
        if r["ok"] and base:
            r["ratio_to_baseline"] = r["tokens_per_s"] / base
    ranked = [r for r in rows if r["ok"]]
    best = max(ranked, key=lambda r: r["tokens_per_s"]) if ranked else None
    if baseline and best:
        baseline["spec_tokens_per_s"] = best["tokens_per_s"]
        baseline["ratio"] = best["ratio_to_baseline"]
    return best
