"""The sequential sweep verdict (patchkit.profile.sequential) on simulated sweeps (no GPU needed).

    PYTHONPATH=. python bench/sequential_sim.py [--sweeps 2000] [--quick]

Every run's throughput is rate x exp(N(0, spread)) (multiplicative noise between server starts),
times 1.08 on the fast GPU in (c). A sequential sweep runs rounds (every live point once) and
recomputes the verdict after every round, stopping as soon as it says "decided" or after
--max-rounds rounds; dropped points get no more runs. Seeded: the same command prints the same
table. Writes bench/results/sequential_sim.{txt,json}.

(a) identical points under optional stopping: how often a best is named (must be <= alpha).
(b) starts per point to decide 5 % and 10 % at 2 % and 4 % spread: sequential against fixed N = 3
    and N = 5 with the existing Welch verdict (patchkit.profile.verdict.decide_fixed); and the
    sequential sweep cut off at the number of rounds that gives it the fixed-N power.
(c) blocks: two GPUs, one 8 % faster; the verdict with pairing on the GPU and without.
(d) the fixed-N Welch verdict recomputed after every round (stopping when significant), as a
    user re-running a fixed-N test would: identical points named best.
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

from patchkit.profile.sequential import ALPHA, METHOD, Race, plan_runs
from patchkit.profile.verdict import decide_fixed

RESULTS = Path(__file__).resolve().parent / "results"
FAST = math.log(1.08)  # the fast GPU's offset in (c)


def sequential_sweep(rng, logs: list[float], spread: float, max_rounds: int, design=None, pair=True):
    """One sweep; returns (rounds run, best or None, total starts). ``design(rng, r, live)`` gives
    {label: gpu} for round r (None: one GPU); ``pair``: tell the verdict which GPU ran what."""
    labels = [f"p{i}" for i in range(len(logs))]
    mu = dict(zip(labels, logs))
    state = Race(labels)
    starts = 0
    for r in range(max_rounds):
        gpus = design(rng, r, state.live) if design else None
        values = {}
        for p in state.live:
            offset = FAST if gpus and gpus[p] == "fast" else 0.0
            values[p] = math.exp(mu[p] + offset + rng.gauss(0.0, spread))
        starts += len(values)
        state.add_round(values, gpus if pair else None)
        if state.decided:
            return r + 1, state.live[0], starts
    return max_rounds, None, starts


def fixed_sweep(rng, logs: list[float], spread: float, n: int) -> str | None:
    samples = {f"p{i}": [math.exp(m + rng.gauss(0.0, spread)) for _ in range(n)] for i, m in enumerate(logs)}
    return decide_fixed(samples)["best"]


def fixed_every_round(rng, logs: list[float], spread: float, max_rounds: int) -> str | None:
    """The fixed-N verdict recomputed after every round from round 2, stopping when significant."""
    samples: dict[str, list[float]] = {f"p{i}": [] for i in range(len(logs))}
    for r in range(max_rounds):
        for i, m in enumerate(logs):
            samples[f"p{i}"].append(math.exp(m + rng.gauss(0.0, spread)))
        if r >= 1 and (best := decide_fixed(samples)["best"]) is not None:
            return best
    return None


# ---- (a) and (d): identical points ----------------------------------------------------------------


def identical(sweeps: int, max_rounds: int, spread: float) -> list[dict]:
    rows = []
    for k in (2, 3, 5):
        rng = random.Random(1000 + k)
        named = 0
        rounds = 0
        for _ in range(sweeps):
            r, best, _starts = sequential_sweep(rng, [0.0] * k, spread, max_rounds)
            named += best is not None
            rounds += r
        rng = random.Random(2000 + k)
        named_fixed = sum(
            fixed_every_round(rng, [0.0] * k, spread, max_rounds) is not None for _ in range(sweeps)
        )
        rows.append(
            {
                "points": k,
                "sweeps": sweeps,
                "sequential_named_best": named / sweeps,
                "sequential_mean_rounds": rounds / sweeps,
                "fixed_welch_every_round_named_best": named_fixed / sweeps,
            }
        )
    return rows


# ---- (b): starts to decide ------------------------------------------------------------------------


def starts(sweeps: int, max_rounds: int) -> list[dict]:
    rows = []
    for spread in (0.02, 0.04):
        for diff in (0.05, 0.10):
            logs = [math.log1p(diff), 0.0]  # p0 is the better point
            rng = random.Random(int(1e4 * spread) * 100 + int(100 * diff))
            results = [sequential_sweep(rng, logs, spread, max_rounds) for _ in range(sweeps)]
            # a decided sweep's stopping round; undecided ones count as never (inf) for power
            stop = [r if best == "p0" else math.inf for r, best, _ in results]
            wrong = sum(best not in (None, "p0") for _, best, _ in results)
            row: dict = {
                "spread": spread,
                "difference": diff,
                "sweeps": sweeps,
                "seq_power": sum(s <= max_rounds for s in stop) / sweeps,
                "seq_wrong": wrong / sweeps,
                "seq_mean_starts": sum(r for r, _, _ in results) / sweeps,
                "seq_median_starts": sorted(r for r, _, _ in results)[sweeps // 2],
                "plan_runs": plan_runs(spread, diff),
            }
            for n in (3, 5):
                rng = random.Random(n * 7 + int(1e4 * spread) + int(100 * diff))
                named = [fixed_sweep(rng, logs, spread, n) for _ in range(sweeps)]
                power = sum(b == "p0" for b in named) / sweeps
                # the sequential sweep stopped after c rounds at the latest: the first c whose
                # power reaches the fixed-N power, and its mean starts per point
                cap = next(
                    (c for c in range(2, max_rounds + 1) if sum(s <= c for s in stop) / sweeps >= power), None
                )
                row[f"fixed{n}_power"] = power
                row[f"fixed{n}_wrong"] = sum(b not in (None, "p0") for b in named) / sweeps
                row[f"seq_cap_for_fixed{n}_power"] = cap
                row[f"seq_mean_starts_at_fixed{n}_power"] = (
                    None if cap is None else sum(min(r, cap) for r, _, _ in results) / sweeps
                )
            rows.append(row)
    return rows


def racing(sweeps: int, max_rounds: int) -> dict:
    """Four points (best, -5 %, -15 %, -30 %) at 2 % spread: total starts of a racing sweep."""
    logs = [0.0, math.log(0.95), math.log(0.85), math.log(0.70)]
    rng = random.Random(77)
    results = [sequential_sweep(rng, logs, 0.02, max_rounds) for _ in range(sweeps)]
    rng = random.Random(78)
    fixed5 = [fixed_sweep(rng, logs, 0.02, 5) for _ in range(sweeps)]
    return {
        "points": "1, 0.95, 0.85, 0.70",
        "spread": 0.02,
        "sweeps": sweeps,
        "seq_power": sum(b == "p0" for _, b, _ in results) / sweeps,
        "seq_wrong": sum(b not in (None, "p0") for _, b, _ in results) / sweeps,
        "seq_mean_total_starts": sum(s for _, _, s in results) / sweeps,
        "seq_mean_rounds": sum(r for r, _, _ in results) / sweeps,
        "fixed5_power": sum(b == "p0" for b in fixed5) / sweeps,
        "fixed5_total_starts": 20,
    }


# ---- (c): blocks ---------------------------------------------------------------------------------


def rotation(rng, r, live):
    """A randomized complete block: every round one point per GPU, which one drawn at random."""
    order = list(live)
    rng.shuffle(order)
    return {p: ("fast", "slow")[i % 2] for i, p in enumerate(order)}


def any_free_gpu(rng, r, live):
    """Each run on whichever GPU is free: drawn at random, so shares are unequal by chance."""
    return {p: rng.choice(("fast", "slow")) for p in live}


def fixed_gpu(rng, r, live):
    """No rotation: the first point always on the fast GPU, the other on the slow one."""
    return {p: ("fast" if p == "p0" else "slow") for p in live}


def blocks(sweeps: int, max_rounds: int, spread: float) -> list[dict]:
    rows = []
    designs = {"rotation": rotation, "any free GPU": any_free_gpu, "fixed GPU per point": fixed_gpu}
    cases = {"identical": [0.0, 0.0], "p1 5 % faster": [0.0, math.log(1.05)]}
    for i, (dname, design) in enumerate(designs.items()):
        for j, (cname, logs) in enumerate(cases.items()):
            for pair in (True, False):
                rng = random.Random(3000 + 10 * i + j)
                res = [sequential_sweep(rng, logs, spread, max_rounds, design, pair) for _ in range(sweeps)]
                truth = None if cname == "identical" else "p1"
                rows.append(
                    {
                        "design": dname,
                        "case": cname,
                        "paired_on_gpu": pair,
                        "sweeps": sweeps,
                        "named_wrong": sum(b is not None and b != truth for _, b, _ in res) / sweeps,
                        "named_right": (sum(b == truth for _, b, _ in res) / sweeps) if truth else None,
                        "mean_rounds": sum(r for r, _, _ in res) / sweeps,
                    }
                )
    return rows


# ---- output --------------------------------------------------------------------------------------


def pct(x) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def render(doc: dict) -> str:
    out = [
        f"sequential sweep verdict: {doc['method']}",
        f"alpha {doc['alpha']}, at most {doc['max_rounds']} rounds, seeded; "
        f"rerun: {doc['command']} ({doc['seconds']:.0f} s)",
        "",
        f"(a) identical points, verdict after every round, spread {pct(doc['spread'])}: sweeps naming a best",
        f"{'points':>6} {'sequential':>11} {'mean rounds':>12} {'(d) Welch re-run each round':>28}",
    ]
    for r in doc["identical"]:
        out.append(
            f"{r['points']:>6} {pct(r['sequential_named_best']):>11} {r['sequential_mean_rounds']:>12.1f} "
            f"{pct(r['fixed_welch_every_round_named_best']):>28}"
        )
    out += [
        "",
        "(b) two points, the first better by `diff`: power (best named and right), mean starts per point",
        f"{'spread':>6} {'diff':>5} | {'seq power':>9} {'mean':>5} {'median':>6} {'plan':>4} | "
        f"{'N=3 power':>9} {'seq cut':>7} {'mean':>5} | {'N=5 power':>9} {'seq cut':>7} {'mean':>5}",
    ]
    for r in doc["starts"]:
        cells = []
        for n in (3, 5):
            cap = r[f"seq_cap_for_fixed{n}_power"]
            mean = r[f"seq_mean_starts_at_fixed{n}_power"]
            cells.append(
                f"{pct(r[f'fixed{n}_power']):>9} {('-' if cap is None else cap):>7} "
                f"{('-' if mean is None else f'{mean:.1f}'):>5}"
            )
        out.append(
            f"{pct(r['spread']):>6} {pct(r['difference']):>5} | {pct(r['seq_power']):>9} "
            f"{r['seq_mean_starts']:>5.1f} {r['seq_median_starts']:>6} {r['plan_runs'] or '-':>4} | "
            + " | ".join(cells)
        )
    out.append(
        "  seq cut: the sequential sweep stopped after that many rounds at the latest reaches the "
        "fixed-N power; mean: its mean starts per point then (fixed N uses N)"
    )
    rc = doc["racing"]
    out += [
        "",
        f"(b') racing, four points {rc['points']} at {pct(rc['spread'])} spread: sequential power "
        f"{pct(rc['seq_power'])} (wrong {pct(rc['seq_wrong'])}), {rc['seq_mean_total_starts']:.1f} "
        f"starts in all ({rc['seq_mean_rounds']:.1f} rounds); fixed N = 5: power {pct(rc['fixed5_power'])}, "
        f"{rc['fixed5_total_starts']} starts",
        "",
        f"(c) two GPUs, one 8 % faster, spread {pct(doc['spread'])}: sweeps naming a wrong best / the right one",
        f"{'design':>20} {'case':>14} {'paired on GPU':>14} {'wrong':>7} {'right':>7} {'mean rounds':>12}",
    ]
    for r in doc["blocks"]:
        out.append(
            f"{r['design']:>20} {r['case']:>14} {('yes' if r['paired_on_gpu'] else 'no'):>14} "
            f"{pct(r['named_wrong']):>7} {pct(r['named_right']):>7} {r['mean_rounds']:>12.1f}"
        )
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=2000)
    parser.add_argument("--max-rounds", type=int, default=30)
    parser.add_argument("--spread", type=float, default=0.02, help="for (a), (c) and (d)")
    parser.add_argument("--quick", action="store_true", help="200 sweeps a cell; no files written")
    args = parser.parse_args(argv)
    sweeps = 200 if args.quick else args.sweeps
    t0 = time.monotonic()
    doc: dict = {
        "method": METHOD,
        "alpha": ALPHA,
        "max_rounds": args.max_rounds,
        "spread": args.spread,
        "command": "PYTHONPATH=. python bench/sequential_sim.py"
        + (f" --sweeps {args.sweeps}" if args.sweeps != 2000 else ""),
    }
    doc["identical"] = identical(sweeps, args.max_rounds, args.spread)
    doc["starts"] = starts(sweeps, args.max_rounds)
    doc["racing"] = racing(sweeps, args.max_rounds)
    doc["blocks"] = blocks(sweeps // 2, args.max_rounds, args.spread)
    doc["seconds"] = time.monotonic() - t0
    text = render(doc)
    print(text, end="")
    if not args.quick:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "sequential_sim.txt").write_text(text)
        (RESULTS / "sequential_sim.json").write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
