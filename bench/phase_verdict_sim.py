"""The per-phase companion of a sweep (verdict.phase_comparison) on simulated starts: how often
identical points get some phase called different, and how often a phase that really differs is
found, at two and three starts a point. Beside it, the test it replaced (Welch's interval on
the phase's own per-start means, Bonferroni over every (point, phase) pair), computed here.

    PYTHONPATH=. nice python bench/phase_verdict_sim.py [--sweeps 400]

Each start of a point gives one mean ms per phase for ten features (nine phases and the whole
cycle). A start's log ms = log(truth) + round effect (shared by every point and phase in that
round: log sd 0.02) + a start effect shared by the start's phases (log sd 0.01) + the phase's own
start-to-start noise. The phases' own log sds: "measured" spreads (the H100/H200 runs: device
times of 0.3-0.5 % between starts, host-side phases 2-5 %) or "one wild" (one phase 8x the
others' 1 %): the pooled variance must not call the wild one different when it is not. Rounds
pair the points (every point runs once per round). Seeded. Writes bench/results/phase_verdict_sim.txt.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from patchkit.profile.verdict import CYCLE, phase_comparison, ratio_interval

RESULTS = Path(__file__).resolve().parent / "results"
PHASES = [f"phase{i}" for i in range(9)] + [CYCLE]
SPREADS = {
    "measured": [0.003, 0.004, 0.005, 0.005, 0.005, 0.02, 0.03, 0.05, 0.01, 0.01],
    "one wild": [0.01] * 7 + [0.08, 0.01, 0.01],
}


def sweep(
    rng: random.Random, points: int, starts: int, spreads: list[float], effect: dict
) -> tuple[dict, dict]:
    truth = {name: 1.0 + i for i, name in enumerate(PHASES)}
    runs: dict[str, list[dict]] = {f"p{k}": [] for k in range(points)}
    rounds: dict[str, list[int]] = {f"p{k}": [] for k in range(points)}
    for rd in range(starts):
        shift = rng.gauss(0, 0.02)
        for k in range(points):
            label = f"p{k}"
            common = rng.gauss(0, 0.01)
            runs[label].append(
                {
                    name: truth[name]
                    * effect.get((label, name), 1.0)
                    * math.exp(shift + common + rng.gauss(0, sd))
                    for name, sd in zip(PHASES, spreads)
                }
            )
            rounds[label].append(rd)
    return runs, rounds


def welch_calls(runs: dict, leader: str, alpha: float = 0.05) -> set[tuple[str, str]]:
    """The replaced test: Welch's interval per (point, phase), Bonferroni over every pair."""
    pairs = [(label, name) for label in runs if label != leader for name in PHASES]
    conf = 1 - alpha / len(pairs)
    out = set()
    for label, name in pairs:
        ci = ratio_interval([r[name] for r in runs[label]], [r[name] for r in runs[leader]], conf)
        if ci and (ci[0] > 1 or ci[1] < 1):
            out.add((label, name))
    return out


def rate(hits: int, n: int) -> str:
    p = hits / n
    return f"{100 * p:5.1f} % (+-{196 * math.sqrt(max(p * (1 - p), 1e-9) / n):.1f})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweeps", type=int, default=400)
    args = ap.parse_args()
    rng = random.Random(20261206)
    t0 = time.perf_counter()
    lines = [
        f"per-phase companion, {args.sweeps} simulated sweeps per row; alpha 0.05 over every (point, phase) pair",
        "",
        "identical points: sweeps with any phase called different (must be <= 5 %)",
        f"{'spreads':10} {'points':>6} {'starts':>6}  {'pooled per phase (now)':>20}  {'Welch (before)':>20}",
    ]
    for spreads in SPREADS:
        for points in (2, 3, 5):
            for starts in (2, 3):
                now = before = 0
                for _ in range(args.sweeps):
                    runs, rounds = sweep(rng, points, starts, SPREADS[spreads], {})
                    got = phase_comparison(runs, "p0", rounds=rounds)
                    now += any(d["differs"] for pt in got["points"].values() for d in pt.values())
                    before += bool(welch_calls(runs, "p0"))
                lines.append(
                    f"{spreads:10} {points:6d} {starts:6d}  {rate(now, args.sweeps):>20}  {rate(before, args.sweeps):>20}"
                )
    lines += [
        "",
        "two points, one phase (phase7: a host-side one, 5 % spread; phase2: a device one, 0.5 %) slower at p1:",
        "sweeps that call it different",
        f"{'phase':8} {'ratio':>6} {'starts':>6}  {'pooled per phase (now)':>20}  {'Welch (before)':>20}  {'other phase called':>20}",
    ]
    for name in ("phase2", "phase7"):
        for ratio in (1.05, 1.2, 3.0):
            for starts in (2, 3):
                now = before = other = 0
                for _ in range(args.sweeps):
                    runs, rounds = sweep(rng, 2, starts, SPREADS["measured"], {("p1", name): ratio})
                    got = phase_comparison(runs, "p0", rounds=rounds)["points"]["p1"]
                    now += got[name]["differs"]
                    other += any(d["differs"] for n, d in got.items() if n != name)
                    before += ("p1", name) in welch_calls(runs, "p0")
                lines.append(
                    f"{name:8} {ratio:6.2f} {starts:6d}  {rate(now, args.sweeps):>20}  "
                    f"{rate(before, args.sweeps):>20}  {rate(other, args.sweeps):>20}"
                )
    lines += ["", f"({time.perf_counter() - t0:.0f} s)"]
    text = "\n".join(lines) + "\n"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "phase_verdict_sim.txt").write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
