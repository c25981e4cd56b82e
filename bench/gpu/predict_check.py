"""Predicted against measured: profile.predict's predict.json beside a profile.remote sweep.

    python bench/gpu/predict_check.py PREDICT_JSON SWEEP_JSON [--out FILE.md] [--json FILE]

For every num-steps point the sweep measured: the predicted tokens/s (from the one profiled
run) and its 95 % interval, the measured runs, their median and range, and the error of the
prediction against the median. The verdict the issue asks for: every prediction within 5 % of
the measured median, and the predicted best the measured best or within the measured spread
of it (its runs' range overlapping the best's).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path


def measured_points(sweep: dict) -> dict[int, list[float]]:
    out: dict[int, list[float]] = {}
    for row in sweep.get("rows", []):
        params = row.get("params") or {}
        steps = params.get("speculative-num-steps") or params.get("speculative_num_steps")
        if steps is None:
            continue
        runs = [r.get("tokens_per_s") for r in row.get("runs", []) if r.get("tokens_per_s")]
        if not runs and row.get("tokens_per_s"):
            runs = [row["tokens_per_s"]]
        out.setdefault(int(steps), []).extend(runs)
    return out


def compare(pred: dict, sweep: dict) -> dict:
    meas = measured_points(sweep)
    rows = []
    for p in pred["points"]:
        n = p["num_steps"]
        runs = meas.get(n, [])
        med = statistics.median(runs) if runs else None
        err = (p["tokens_per_s"] / med - 1) if med and p["tokens_per_s"] else None
        rows.append(
            {
                "num_steps": n,
                "predicted": p["tokens_per_s"],
                "predicted_ci95": p["tokens_per_s_ci95"],
                "measured_runs": runs,
                "measured_median": med,
                "measured_range": [min(runs), max(runs)] if runs else None,
                "error": err,
            }
        )
    have = [r for r in rows if r["measured_median"] is not None]
    pred_best = pred["best"]["num_steps"]
    meas_best = max(have, key=lambda r: r["measured_median"])["num_steps"] if have else None
    best_row = next((r for r in have if r["num_steps"] == meas_best), None)
    pb_row = next((r for r in have if r["num_steps"] == pred_best), None)
    overlap = bool(best_row and pb_row and pb_row["measured_range"][1] >= best_row["measured_range"][0])
    return {
        "rows": rows,
        "within_5pct": all(abs(r["error"]) <= 0.05 for r in have if r["error"] is not None),
        "max_abs_error": max((abs(r["error"]) for r in have if r["error"] is not None), default=None),
        "predicted_best": pred_best,
        "measured_best": meas_best,
        "best_agrees": pred_best == meas_best or overlap,
    }


def render(name: str, pred: dict, cmp: dict) -> str:
    lines = [
        f"### {name}: profiled once at num-steps {pred['profiled']['num_steps']}, "
        f"{pred['profiled']['tokens_per_s']} tok/s measured there",
        "",
        "| num-steps | predicted tok/s [95 %] | measured runs | measured median | error |",
        "|---|---|---|---|---|",
    ]
    for r in cmp["rows"]:
        ci = r["predicted_ci95"]
        lines.append(
            f"| {r['num_steps']} | {r['predicted']:.0f} "
            + (f"[{ci[0]:.0f}..{ci[1]:.0f}]" if ci else "")
            + f" | {', '.join(f'{v:.0f}' for v in r['measured_runs']) or '-'} | "
            + (f"{r['measured_median']:.0f}" if r["measured_median"] else "-")
            + " | "
            + (f"{r['error'] * 100:+.1f} %" if r["error"] is not None else "-")
            + " |"
        )
    lines += [
        "",
        f"every prediction within 5 % of the measured median: {cmp['within_5pct']} "
        f"(largest error {cmp['max_abs_error'] * 100:.1f} %)"
        if cmp["max_abs_error"] is not None
        else "no measured points",
        f"predicted best num-steps {cmp['predicted_best']}, measured best {cmp['measured_best']}: "
        + ("agree (same point or within its measured range)" if cmp["best_agrees"] else "DISAGREE"),
        "",
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("predict")
    ap.add_argument("sweep")
    ap.add_argument("--name", default="prediction")
    ap.add_argument("--out")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    pred = json.loads(Path(a.predict).read_text())
    sweep = json.loads(Path(a.sweep).read_text())
    cmp = compare(pred, sweep)
    text = render(a.name, pred, cmp)
    sys.stdout.write(text)
    if a.out:
        Path(a.out).write_text(text)
    if a.json:
        Path(a.json).write_text(json.dumps({"name": a.name, **cmp}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
