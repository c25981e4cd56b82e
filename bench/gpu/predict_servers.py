"""Predicted against measured, server by server: where a prediction's error comes from.

    python bench/gpu/predict_servers.py PROFILED_RUN MEASURED_POINT... [--json FILE]

PROFILED_RUN: the run folder profile.predict read (its timing/ and summary.json); each
MEASURED_POINT: a point folder of a profile.remote sweep (points/NN-num-stepsK, with timing/
and summary.json). For each measuring server: its tokens/s and the prediction for its
num-steps, then what its benchmark was made of (decode cycles, prefill cycles, their mean
periods) beside what the replay predicted, and the prediction again with this server's own
prefill-cycle cost put in (what is left of the error is the decode cycles). Per num-steps: the
median of the measuring servers (the profiled run counted at its own num-steps) against the
prediction.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from patchkit.report.benchsim import cycle_costs  # noqa: E402
from patchkit.report.load import load_timing_dir  # noqa: E402
from patchkit.report.predict import predict_run  # noqa: E402
from patchkit.report.summarize import select  # noqa: E402


def server(folder: Path) -> dict:
    meta = json.loads((folder / "summary.json").read_text())["meta"]
    sel = select(load_timing_dir(folder / "timing"), str(folder / "timing"))
    lead = min(sel.procs, key=lambda p: p.rank)
    costs = cycle_costs(lead.cycles, sel.stall_sets[sel.procs.index(lead)])
    assert costs is not None, folder
    steps = re.search(r"--speculative-num-steps (\d+)", meta["server_command"])
    return {
        "folder": str(folder),
        "num_steps": int(steps.group(1)) if steps else None,
        "tokens_per_s": meta["tokens_per_s"],
        "accept_length": meta.get("accept_length"),
        "decode_cycles": costs.decode_cycles,
        "prefill_cycles": costs.prefill_cycles,
        "decode_ms": costs.decode_total / costs.decode_cycles / 1e6,
        "prefill_ms": costs.prefill / 1e6,
        "cycles_s": (costs.decode_total + costs.prefill_total) / 1e9,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("profiled")
    ap.add_argument("measured", nargs="+")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    pred = predict_run(args.profiled, bootstrap=200)
    points = {p["num_steps"]: p for p in pred["points"]}
    prof = server(Path(args.profiled))
    rows = [server(Path(m)) for m in args.measured]
    print(
        f"profiled: {args.profiled}: num-steps {pred['profiled']['num_steps']}, {prof['tokens_per_s']:.1f} tok/s"
    )
    print(
        f"{'server':44} {'n':>2} {'tok/s':>7} {'pred':>7} {'err %':>6} | {'decode cyc':>10} {'pred':>5} "
        f"{'prefill cyc':>11} {'pred':>5} {'decode ms':>9} {'pred':>6} {'prefill ms':>10} | {'own prefill: pred':>17} {'err %':>6}"
    )
    for r in rows:
        p = points[r["num_steps"]]
        b = p["benchmark"]
        own = (
            pred["simulation"]["load"]["requests"]
            * pred["simulation"]["load"]["output_len"]
            / (b["decode_s"] + b["prefill_cycles"] * r["prefill_ms"] / 1e3)
        )
        r.update(
            predicted=p["tokens_per_s"],
            error_pct=(p["tokens_per_s"] / r["tokens_per_s"] - 1) * 100,
            predicted_with_own_prefill=own,
            own_error_pct=(own / r["tokens_per_s"] - 1) * 100,
        )
        print(
            f"{Path(r['folder']).parent.parent.name + '/' + Path(r['folder']).name:44} {r['num_steps']:>2} "
            f"{r['tokens_per_s']:>7.0f} {p['tokens_per_s']:>7.0f} {r['error_pct']:>+6.1f} | {r['decode_cycles']:>10} "
            f"{b['decode_cycles']:>5.0f} {r['prefill_cycles']:>11} {b['prefill_cycles']:>5.0f} {r['decode_ms']:>9.2f} "
            f"{b['decode_s'] * 1e3 / b['decode_cycles']:>6.2f} {r['prefill_ms']:>10.1f} | {own:>17.0f} {r['own_error_pct']:>+6.1f}"
        )
    print(f"{'num-steps':>9} {'predicted [95 %]':>24} {'measured (servers)':>32} {'median':>7} {'err %':>6}")
    summary = []
    for n, p in sorted(points.items()):
        measured = [r["tokens_per_s"] for r in rows if r["num_steps"] == n]
        if n == pred["profiled"]["num_steps"]:
            measured.append(prof["tokens_per_s"])
        ci = p["tokens_per_s_ci95"]
        med = statistics.median(measured) if measured else None
        summary.append(
            {"num_steps": n, "predicted": p["tokens_per_s"], "ci95": ci, "measured": measured, "median": med}
        )
        print(
            f"{n:>9} {p['tokens_per_s']:>7.0f} [{ci[0]:.0f}..{ci[1]:.0f}]".ljust(35)
            + f"{', '.join(f'{m:.0f}' for m in sorted(measured)) or '-':>32} "
            + (f"{med:>7.0f} {(p['tokens_per_s'] / med - 1) * 100:>+6.1f}" if med else "")
        )
    print(f"predicted best: num-steps {pred['best']['num_steps']}")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"servers": rows, "points": summary, "prediction": pred}, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
