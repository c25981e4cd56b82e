"""The bounded sweep verdict (a horizon of rounds, alpha spent over it) against the anytime-valid
one and fixed N, on simulated sweeps (no GPU needed).

    PYTHONPATH=. nice python bench/bounded_sim.py [--sweeps 1000] [--quick]

A run's log tok/s is the point's level + the round's shift N(0, round sd) + the GPU's offset
(two GPUs, one 8 % faster, points spread over them by a Latin square, paired in the verdict) +
N(0, spread) between starts. The spreads are those measured between starts on the GPU
(bench/results/s3_h200.md: 0.6-4.8 % for the 8B pair; 2-3 % after the prefill adjustment).
Sweeps run rounds of the live points up to the horizon H and stop when decided; the last
round spends what is left. Seeded: the same command prints the same tables. Writes
bench/results/bounded_sim.{txt,json}.

(a) identical points (k = 2, 3, 5), with and without round and GPU effects: sweeps naming a best.
(b) two points 5 % and 10 % apart at 2 % and 3 % spread: power (the right best named) and mean
    starts per point for the bounded test at horizons 4..12, the anytime-valid test stopped at
    the same horizon, and fixed N = H with the Welch verdict (patchkit.profile.verdict.decide_fixed);
    with the coverage, at the stop, of every interval of the decision (the true ratio inside).
(c) the same with a 2 % round effect: rounds are blocks in the bounded test only.
(d) the fewest mean starts per point that reach 80 % and 90 % power, each method.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from patchkit.profile.sequential import ALPHA, SPENDING, Race
from patchkit.profile.verdict import decide_fixed

RESULTS = Path(__file__).resolve().parent / "results"
FAST = math.log(1.08)
HORIZONS = (4, 6, 8, 10, 12)
TARGET_POWER = (0.8, 0.9)


def sweep(rng, logs, spread, horizon, *, round_sd=0.0, gpus=False, bounded=True, spending=SPENDING):
    """One sweep: (rounds, best or None, starts per point, every interval covers the truth)."""
    labels = [f"p{i}" for i in range(len(logs))]
    mu = dict(zip(labels, logs))
    state = Race(labels, horizon=horizon if bounded else None, spending=spending)
    starts = 0
    for r in range(horizon):
        shift = rng.gauss(0.0, round_sd)
        live = list(state.live)
        if gpus:
            order = [live[(r + i) % len(live)] for i in range(len(live))]
            blocks = {p: ("fast", "slow")[i % 2] for i, p in enumerate(order)}
        else:
            blocks = None
        values = {
            p: math.exp(
                mu[p] + shift + (FAST if blocks and blocks[p] == "fast" else 0.0) + rng.gauss(0.0, spread)
            )
            for p in live
        }
        starts += len(values)
        state.add_round(values, blocks, final=r == horizon - 1)
        if state.decided:
            break
    d = state.decision()
    covers = all(
        lo <= math.exp(mu[p] - mu[d.leader]) <= hi
        for p, (lo, hi) in d.intervals.items()
        if d.leader and p != d.leader
    )
    return state.rounds, d.best, starts / len(logs), covers


def fixed(rng, logs, spread, n) -> str | None:
    samples = {f"p{i}": [math.exp(m + rng.gauss(0.0, spread)) for _ in range(n)] for i, m in enumerate(logs)}
    return decide_fixed(samples)["best"]


def identical(sweeps: int) -> list[dict]:
    rows = []
    for k in (2, 3, 5):
        for horizon in (6, 10):
            for effects in (False, True):
                cell = {}
                for bounded in (True, False):
                    rng = random.Random(100 * k + horizon + 7 * effects + 1000 * bounded)
                    res = [
                        sweep(
                            rng,
                            [0.0] * k,
                            0.02,
                            horizon,
                            round_sd=0.02 * effects,
                            gpus=effects,
                            bounded=bounded,
                        )
                        for _ in range(sweeps)
                    ]
                    key = "bounded" if bounded else "anytime"
                    cell[key] = sum(b is not None for _, b, _, _ in res) / sweeps
                    cell[f"{key}_coverage"] = sum(c for *_, c in res) / sweeps
                rows.append(
                    {"points": k, "horizon": horizon, "round_and_gpu_effects": effects, "sweeps": sweeps}
                    | cell
                )
    return rows


def power(sweeps: int, round_sd: float) -> list[dict]:
    rows = []
    for spread in (0.02, 0.03):
        for diff in (0.05, 0.10):
            logs = [math.log1p(diff), 0.0]
            for horizon in HORIZONS:
                row: dict = {"spread": spread, "difference": diff, "horizon": horizon, "round_sd": round_sd}
                for name, bounded in (("bounded", True), ("anytime", False)):
                    rng = random.Random(int(1e4 * spread) + int(100 * diff) + horizon + 50 * bounded)
                    res = [
                        sweep(rng, logs, spread, horizon, round_sd=round_sd, bounded=bounded)
                        for _ in range(sweeps)
                    ]
                    row[f"{name}_power"] = sum(b == "p0" for _, b, _, _ in res) / sweeps
                    row[f"{name}_wrong"] = sum(b not in (None, "p0") for _, b, _, _ in res) / sweeps
                    row[f"{name}_starts"] = sum(s for _, _, s, _ in res) / sweeps
                    row[f"{name}_coverage"] = sum(c for *_, c in res) / sweeps
                rng = random.Random(int(1e4 * spread) + int(100 * diff) + horizon + 999)
                if round_sd:
                    named = []
                    for _ in range(sweeps):  # fixed N in rounds: every run of a round shares its shift
                        shifts = [rng.gauss(0.0, round_sd) for _ in range(horizon)]
                        samples = {
                            f"p{i}": [math.exp(m + s + rng.gauss(0.0, spread)) for s in shifts]
                            for i, m in enumerate(logs)
                        }
                        named.append(decide_fixed(samples)["best"])
                else:
                    named = [fixed(rng, logs, spread, horizon) for _ in range(sweeps)]
                row["fixed_power"] = sum(b == "p0" for b in named) / sweeps
                row["fixed_starts"] = horizon
                rows.append(row)
    return rows


def fixed_power(sweeps: int, round_sd: float) -> dict:
    """Fixed N = 2..14 with the Welch verdict: power per (spread, difference, N)."""
    out: dict = {}
    for spread in (0.02, 0.03):
        for diff in (0.05, 0.10):
            logs = [math.log1p(diff), 0.0]
            for n in range(2, 15):
                rng = random.Random(int(1e4 * spread) + int(100 * diff) + n + 4242)
                named = []
                for _ in range(sweeps):
                    shifts = [rng.gauss(0.0, round_sd) for _ in range(n)]
                    samples = {
                        f"p{i}": [math.exp(m + s + rng.gauss(0.0, spread)) for s in shifts]
                        for i, m in enumerate(logs)
                    }
                    named.append(decide_fixed(samples)["best"])
                out[f"{spread}/{diff}/{n}"] = sum(b == "p0" for b in named) / sweeps
    return out


def summary(rows: list[dict], fixed: dict) -> list[dict]:
    """Per (spread, difference): the fewest mean starts per point that reach each target power,
    for the bounded test (over the horizons), the anytime-valid one stopped at the same
    horizons, and fixed N."""
    out = []
    for spread in (0.02, 0.03):
        for diff in (0.05, 0.10):
            cell = [r for r in rows if r["spread"] == spread and r["difference"] == diff]
            entry: dict = {"spread": spread, "difference": diff}
            for goal in TARGET_POWER:
                for name in ("bounded", "anytime"):
                    hit = next((r for r in cell if r[f"{name}_power"] >= goal), None)
                    entry[f"{name}_{goal}"] = None if hit is None else [hit["horizon"], hit[f"{name}_starts"]]
                n = next((n for n in range(2, 15) if fixed[f"{spread}/{diff}/{n}"] >= goal), None)
                entry[f"fixed_{goal}"] = n
            out.append(entry)
    return out


def pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def render(doc: dict) -> str:
    out = [
        f"bounded sweep verdict ({doc['spending']} spending) against the anytime-valid one and fixed N; "
        f"alpha {doc['alpha']}, {doc['sweeps']} sweeps a cell, seeded",
        f"rerun: {doc['command']} ({doc['seconds']:.0f} s on one core)",
        "",
        "(a) identical points: sweeps naming a best (binomial sd ~0.7 points at 5 %); "
        "coverage of every interval at the stop",
        f"{'points':>6} {'H':>3} {'round+GPU':>9} | {'bounded':>8} {'cover':>7} | {'anytime':>8} {'cover':>7}",
    ]
    for r in doc["identical"]:
        out.append(
            f"{r['points']:>6} {r['horizon']:>3} {('yes' if r['round_and_gpu_effects'] else 'no'):>9} | "
            f"{pct(r['bounded']):>8} {pct(r['bounded_coverage']):>7} | {pct(r['anytime']):>8} "
            f"{pct(r['anytime_coverage']):>7}"
        )
    for key, title in (
        ("power", "(b) two points: power and mean starts per point (horizon H = the most rounds)"),
        ("power_rounds", "(c) the same with a 2 % round effect (every run of a round shifted alike)"),
    ):
        out += [
            "",
            title,
            f"{'spread':>6} {'diff':>5} {'H':>3} | {'bounded':>8} {'starts':>6} {'cover':>7} | "
            f"{'anytime':>8} {'starts':>6} | {'fixed N=H':>9}",
        ]
        for r in doc[key]:
            out.append(
                f"{pct(r['spread']):>6} {pct(r['difference']):>5} {r['horizon']:>3} | "
                f"{pct(r['bounded_power']):>8} {r['bounded_starts']:>6.2f} {pct(r['bounded_coverage']):>7} | "
                f"{pct(r['anytime_power']):>8} {r['anytime_starts']:>6.2f} | {pct(r['fixed_power']):>9}"
            )
    for key, title in (("summary", "no round effect"), ("summary_rounds", "2 % round effect")):
        out += [
            "",
            f"(d) mean starts per point to reach 80 % / 90 % power ({title}); bounded and anytime: "
            "the first horizon that reaches it (H in brackets)",
            f"{'spread':>6} {'diff':>5} | {'bounded 80':>11} {'anytime 80':>11} {'fixed 80':>8} | "
            f"{'bounded 90':>11} {'anytime 90':>11} {'fixed 90':>8}",
        ]

        def cell(v) -> str:
            return "-" if v is None else f"{v[1]:.1f} (H{v[0]})"

        for r in doc[key]:
            out.append(
                f"{pct(r['spread']):>6} {pct(r['difference']):>5} | {cell(r['bounded_0.8']):>11} "
                f"{cell(r['anytime_0.8']):>11} {r['fixed_0.8'] or '-':>8} | {cell(r['bounded_0.9']):>11} "
                f"{cell(r['anytime_0.9']):>11} {r['fixed_0.9'] or '-':>8}"
            )
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="200 sweeps a cell; no files written")
    args = parser.parse_args(argv)
    sweeps = 200 if args.quick else args.sweeps
    t0 = time.process_time()
    doc: dict = {
        "alpha": ALPHA,
        "spending": SPENDING,
        "sweeps": sweeps,
        "command": "PYTHONPATH=. nice python bench/bounded_sim.py"
        + (f" --sweeps {args.sweeps}" if args.sweeps != 1000 else ""),
    }
    doc["identical"] = identical(sweeps)
    doc["power"] = power(sweeps, 0.0)
    doc["power_rounds"] = power(sweeps // 2, 0.02)
    doc["summary"] = summary(doc["power"], fixed_power(sweeps, 0.0))
    doc["summary_rounds"] = summary(doc["power_rounds"], fixed_power(sweeps // 2, 0.02))
    doc["seconds"] = time.process_time() - t0
    text = render(doc)
    print(text, end="")
    if not args.quick:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "bounded_sim.txt").write_text(text)
        (RESULTS / "bounded_sim.json").write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
