"""The sweep's decision on simulated servers: the sweep's own round loop (``_Rounds.run`` of
patchkit/profile/remote/sweep.py, its horizon planning, racing, drops and stop) with only the
server start replaced by a draw of tok/s. No GPU needed; seeded, so a command prints the same
table every time.

    PYTHONPATH=. nice python bench/decision_sim.py [--sweeps 400] [--quick]

A start's log tok/s is the point's level + the round's shift N(0, round sd) + N(0, spread).
Differences are stated in tok/s (5 % apart: a ratio of 1.05). The spreads are the variance
components measured between starts on the GPU: 2 % (a quiet H100 server), and the H200's
(2.5 % after the prefill adjustment with a 2 % round effect, bench/results/s3_h200.md).

Each cell: the share of sweeps that name the truly best point (or, identical points, any
point), the mean starts in all, and two fixed designs at the same cost (N starts a point, N the
two whole numbers around the sweep's mean starts a point, interpolated): the Welch verdict
(patchkit.profile.verdict.decide_fixed, the spread unknown) and, where the sweep knew the spread,
the z test with that same spread (computed). "known": the spread cache holds the spread (the z
test); "measured": no cache (the t test, its horizon planned at round 2). The stand-in: each
start's prefill period drawn 30 % around 20 ms (tests/support/sweep_sim.py).
Writes bench/results/decision_sim.txt.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path
from statistics import NormalDist

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from patchkit.profile.verdict import decide_fixed

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.sweep_sim import named_best, run_sweep

RESULTS = Path(__file__).resolve().parent / "results"


def one_sweep(rng, logs, spread, *, known=True, round_sd=0.0, **kw):
    """One sweep through _Rounds.run: (best or None, starts in all, rounds)."""
    cache = spread * math.sqrt(1.0 + (round_sd / spread) ** 2) if known else None
    state = run_sweep(rng, logs, spread, round_sd=round_sd, known=cache, **kw)
    return named_best(state), len(state.order), len(state.rounds)


def fixed_power(rng, logs, spread, n, sweeps, round_sd=0.0, truth="p0"):
    """The fixed design: n starts a point (rounds of every point), the Welch verdict at alpha."""
    hits = 0
    for _ in range(sweeps):
        samples = {f"p{i}": [] for i in range(len(logs))}
        for _r in range(n):
            shift = rng.gauss(0.0, round_sd)
            for i, x in enumerate(logs):
                samples[f"p{i}"].append(math.exp(x + shift + rng.gauss(0.0, spread)))
        v = decide_fixed(samples)
        hits += bool(v["significant"] and (v["best"] == truth if truth else True))
    return hits / sweeps


def fixed_z(logs, spread, n, alpha=0.05):
    """The fixed z test's power with the spread known: n starts a point, the best against the
    next, two-sided at alpha / (K - 1) (the sweep's Bonferroni); computed."""
    ranked = sorted(logs, reverse=True)
    gap = ranked[0] - ranked[1]
    crit = NormalDist().inv_cdf(1.0 - alpha / max(1, len(logs) - 1) / 2.0)
    return NormalDist().cdf(gap / (spread * math.sqrt(2.0 / n)) - crit)


def cell(name, logs, spread, sweeps, seed, truth="p0", **kw):
    rng = random.Random(seed)
    got = [one_sweep(rng, logs, spread, **kw) for _ in range(sweeps)]
    right = sum((b == truth) if truth else (b is not None) for b, _s, _r in got) / sweeps
    starts = sum(s for _b, s, _r in got) / sweeps
    out = {"case": name, "right": right, "starts": starts, "points": len(logs)}
    if truth and kw.get("prefill_sd") is None:  # the fixed designs draw plain lognormal starts
        if kw.get("baseline") is not None:  # the baseline raced: a second point of the fixed design
            logs = [*logs, kw["baseline"]]
        per = starts / len(logs)
        lo, hi = max(2, math.floor(per)), max(2, math.ceil(per))
        frng = random.Random(seed + 1)
        p_lo = fixed_power(frng, logs, spread, lo, sweeps, kw.get("round_sd", 0.0), truth)
        p_hi = (
            p_lo if hi == lo else fixed_power(frng, logs, spread, hi, sweeps, kw.get("round_sd", 0.0), truth)
        )
        w = 0.0 if hi == lo else (per - lo) / (hi - lo)
        out["fixed"] = (1 - w) * p_lo + w * p_hi
        out["fixed_n"] = f"{lo}..{hi}" if hi != lo else str(lo)
        if kw.get("known"):  # the fixed z test with the same known spread, at the same cost
            z = [
                fixed_z(logs, spread * math.sqrt(1.0 + (kw.get("round_sd", 0.0) / spread) ** 2), m)
                for m in (lo, hi)
            ]
            out["fixed_z"] = (1 - w) * z[0] + w * z[1]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweeps", type=int, default=400)
    ap.add_argument("--quick", action="store_true", help="100 sweeps a cell")
    args = ap.parse_args(argv)
    n = 100 if args.quick else args.sweeps
    d5, d10 = math.log(1.05), math.log(1.10)
    cells = [
        ("5 % apart, 2 % spread, known", [d5, 0.0], 0.02, {"known": True}),
        ("5 % apart, 2 % spread, measured", [d5, 0.0], 0.02, {"known": False}),
        ("5 % apart, 3 % spread, known", [d5, 0.0], 0.03, {"known": True}),
        ("10 % apart, 3 % spread, measured", [d10, 0.0], 0.03, {"known": False}),
        ("5 % apart, H200 (2.5 % + 2 % round), known", [d5, 0.0], 0.025, {"known": True, "round_sd": 0.02}),
        (
            "5 % apart, H200 (2.5 % + 2 % round), measured",
            [d5, 0.0],
            0.025,
            {"known": False, "round_sd": 0.02},
        ),
        ("best 5 % over the baseline, 2 % spread, known", [d5], 0.02, {"known": True, "baseline": 0.0}),
        (
            "stand-in: 6 % apart, prefill nuisance 30 %, measured",
            [math.log(1.06), 0.0],
            0.01,
            {"known": False, "prefill_sd": 0.3},
        ),
    ]
    null = []
    for k in (2, 3, 5):
        for rsd, known in ((0.0, True), (0.02, True), (0.02, False)):
            null.append(
                (
                    f"identical, k={k}, round sd {rsd:g}, {'known' if known else 'measured'}",
                    [0.0] * k,
                    0.02,
                    {"known": known, "round_sd": rsd},
                )
            )
    lines = [f"decision_sim: {n} sweeps a cell (bench/decision_sim.py)", ""]
    lines.append(f"{'case':52} {'right':>6} {'starts':>7} {'Welch, same cost':>18} {'fixed z':>8}")
    for i, (name, logs, spread, kw) in enumerate(cells):
        r = cell(name, logs, spread, n, 100 + i, **kw)
        fz = f"{r['fixed_z']:8.1%}" if "fixed_z" in r else f"{'-':>8}"
        welch = f"{r['fixed']:10.1%} (N {r['fixed_n']})" if "fixed" in r else f"{'-':>18}"
        lines.append(f"{name:52} {r['right']:6.1%} {r['starts']:7.2f} {welch} {fz}")
        print(lines[-1], flush=True)
    lines += ["", f"{'identical points':52} {'named':>6} {'starts':>7}"]
    for i, (name, logs, spread, kw) in enumerate(null):
        r = cell(name, logs, spread, n, 300 + i, truth=None, **kw)
        lines.append(f"{name:52} {r['right']:6.1%} {r['starts']:7.2f}")
        print(lines[-1], flush=True)
    if not args.quick:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "decision_sim.txt").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
