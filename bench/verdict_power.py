"""How often the sweep verdict names a best point, on simulated repetitions (no GPU needed).

    PYTHONPATH=. python bench/verdict_power.py [--trials 2000] [--cv 0.02]

Each trial draws N throughputs per point as rate x exp(N(0, cv)) (multiplicative noise between
server starts) and runs patchkit.profile.verdict.decide_fixed. Printed side by side per N and number of
points k: the rate at which identical points get a "best" (must stay at most alpha = 0.05), and
the power at 0.1%, 5% and 30% apart (one point faster, the others equal).
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from patchkit.profile.verdict import DEFAULT_ALPHA, decide_fixed


def rate(n: int, k: int, gap: float, cv: float, trials: int, seed: int) -> float:
    rng = random.Random(seed)
    hits = 0
    for _ in range(trials):
        samples = {
            f"p{i}": [1000.0 * (1 + gap * (i == 0)) * math.exp(rng.gauss(0, cv)) for _ in range(n)]
            for i in range(k)
        }
        hits += decide_fixed(samples)["significant"]
    return hits / trials


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--cv", type=float, default=0.02, help="spread between server starts")
    args = parser.parse_args(argv)
    print(f"cv {args.cv:.1%}, {args.trials} trials, alpha {DEFAULT_ALPHA}")
    print(f"{'N':>3} {'k':>3} {'identical':>10} {'0.1% apart':>11} {'5% apart':>9} {'30% apart':>10}")
    for n in (3, 5, 8):
        for k in (2, 3, 5):
            cells = [
                rate(n, k, gap, args.cv, args.trials, seed=100 * n + k) for gap in (0.0, 0.001, 0.05, 0.3)
            ]
            print(f"{n:>3} {k:>3} " + " ".join(f"{c:>{w}.3f}" for c, w in zip(cells, (10, 11, 9, 10))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
