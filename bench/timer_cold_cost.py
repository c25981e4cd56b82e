"""The timer's host cost per call hot and cold, side by side in one run (CPU, a proxy).

On the H200 a begin/end call cost 3.5-6 us inside SGLang's scheduler (bench/results/
sglang_gpu_timer_cost.md) but 0.9 us in a tight loop here: between two timer calls the scheduler
runs far more Python than fits in the caches, so each call finds the timer's code and data cold.
This benchmark reproduces that on a CPU: between any two timer calls it runs a "scrub" (a few
hundred calls of thousands of distinct generated functions over a pool of ~200k small objects,
tens of MB), and it times only the timer calls themselves (perf_counter_ns around each). The
same cycle (SGLang's v2 shape: cycle_begin, 8 phases one of them nested, note, cycle_end with
a token count) runs hot (no scrub) and cold, rounds interleaved, per mode:
  off          PATCHKIT_TIMER=off (the clock reads around a no-op: the measuring floor)
  ab-off       an off block of PATCHKIT_TIMER_AB (cycle host times only)
  ab-bare      an off block with PATCHKIT_TIMER_AB_B=bare (cycle starts only)
  events*      events mode with a stand-in event class (the Python side of events mode)
  events*/16   PATCHKIT_TIMER_SAMPLE=16
  events*+rb8  (--modes) timed cycles resolved and written 8 at a time (PATCHKIT_TIMER_RESOLVE_BATCH)
With --baseline REV (a git revision or a file) the same modes also run through that runtime,
interleaved with this one ("mode (before)" rows).
The CUDA driver's own cold cost (event record, elapsed_time) is not in it: a GPU host measures
that (bench/gpu/run_h200.sh diag). A proxy: this machine's caches are not the H200 host's.

Usage: python bench/timer_cold_cost.py [--cycles 300] [--rounds 5] [--scrub 300] [--baseline REV]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timer_host_cost import (
    RUNTIME,
    ab_off_block,
    baseline_runtime,
    install_stand_in_torch,
    load_runtime,
)

_perf = time.perf_counter_ns
PHASES = ("draft_preprocess", "draft_forward", "build_tree", "verify_prepare", "target_verify", "accept")


def make_scrub(n_funcs, n_objects, per_gap, seed=7):
    """A callable that runs `per_gap` of `n_funcs` distinct functions over random objects."""
    rng = random.Random(seed)
    pool = [{"a": i, "b": [i, i + 1, i + 2], "c": str(i)} for i in range(n_objects)]
    funcs = []
    for i in range(n_funcs):
        k1, k2 = rng.randrange(1, 97), rng.randrange(1, 89)
        src = (
            "def f%d(pool, r):\n"
            "    x = pool[r %% %d]\n"
            "    y = pool[(r * %d) %% %d]\n"
            "    s = x['a'] + len(y['b']) + %d\n"
            "    if s %% 3 == 0:\n"
            "        y['b'][0] = s\n"
            "    return s ^ %d\n" % (i, n_objects, k1, n_objects, k2, i)
        )
        ns = {}
        exec(compile(src, "<scrub%d>" % i, "exec"), ns)
        funcs.append(ns["f%d" % i])
    order = [rng.randrange(n_funcs) for _ in range(1 << 16)]
    draws = [rng.randrange(1 << 30) for _ in range(1 << 16)]
    state = [0]

    def scrub():
        i = state[0]
        for j in range(i, i + per_gap):
            funcs[order[j & 0xFFFF]](pool, draws[j & 0xFFFF])
        state[0] = (i + per_gap) & 0xFFFF

    return scrub


# SGLang v2's decode cycle: (API function, args, kwargs), in call order
STEPS = (
    [("cycle_begin", (), {"kind": "decode", "batch_size": 32})]
    + [step for name in PHASES for step in (("begin", (name,), {}), ("end", (name,), {}))]
    + [
        ("begin", ("draft_extend_after_decode",), {}),
        ("begin", ("draft_extend_forward",), {"graph": True}),
        ("end", ("draft_extend_forward",), {}),
        ("end", ("draft_extend_after_decode",), {}),
        ("note", (), {"verify_graph": True}),
        ("cycle_end", (), {"tokens": 3}),
    ]
)
CALLS = len(STEPS)


def cycle(pt, gap):
    """One SGLang-v2-shaped cycle, `gap` run after every call; returns the ns spent inside
    timer calls (each looked up on the module at its call: the runtime rebinds them)."""
    spent = 0
    for name, args, kwargs in STEPS:
        fn = getattr(pt, name)
        t = _perf()
        fn(*args, **kwargs)
        spent += _perf() - t
        gap()
    return spent


def configure(pt, mode, directory):
    pt.shutdown()
    mode, _, batch = mode.partition("+rb")  # events*+rb8: PATCHKIT_TIMER_RESOLVE_BATCH=8
    if batch:
        os.environ["PATCHKIT_TIMER_RESOLVE_BATCH"] = batch
    else:
        os.environ.pop("PATCHKIT_TIMER_RESOLVE_BATCH", None)
    if mode == "ab-bare":
        os.environ["PATCHKIT_TIMER_AB_B"] = "bare"
    else:
        os.environ.pop("PATCHKIT_TIMER_AB_B", None)
    if mode == "off":
        pt.configure(mode="off", directory=directory)
    elif mode in ("ab-off", "ab-bare"):
        ab_off_block(pt, Path(directory))
    elif mode.startswith("events*/"):
        pt.configure(mode="events", directory=directory, sample=int(mode.split("/")[1]), seed=1)
    else:  # every cycle timed (sample=1: not the runtime's budget)
        pt.configure(mode="events", directory=directory, sample=1)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--scrub", type=int, default=300, help="generated-function calls between two timer calls")
    ap.add_argument("--funcs", type=int, default=4000)
    ap.add_argument("--objects", type=int, default=200_000)
    ap.add_argument("--baseline", default=None, help="also run this revision's (or file's) runtime")
    ap.add_argument(
        "--modes",
        default="off,ab-bare,ab-off,events*,events*/16",
        help="comma-separated; events*+rbN also resolves timed cycles N at a time (PATCHKIT_TIMER_RESOLVE_BATCH)",
    )
    a = ap.parse_args(argv)
    install_stand_in_torch()
    os.environ.pop("PATCHKIT_TIMER", None)
    runtimes = {"": load_runtime(RUNTIME, "phase_timer_cold")}
    scrub = make_scrub(a.funcs, a.objects, a.scrub)
    base_modes = a.modes.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        if a.baseline:
            before = baseline_runtime(a.baseline, Path(tmp))
            if before is None:
                print("timer_cold_cost: no runtime at %r" % a.baseline)
                return 1
            runtimes[" (before)"] = before
        modes = [(m, tag) for m in base_modes for tag in runtimes]
        res = {(m, tag, h): [] for (m, tag) in modes for h in ("hot", "cold")}
        for rnd in range(a.rounds):
            for k in range(len(modes)):
                mode, tag = modes[(k + rnd) % len(modes)]
                pt = runtimes[tag]
                for heat in ("hot", "cold") if rnd % 2 == 0 else ("cold", "hot"):
                    where = "%s%s-%s-%d" % (mode.replace("/", "_"), tag.strip(" ()"), heat, rnd)
                    configure(pt, mode, os.path.join(tmp, where))
                    gap = scrub if heat == "cold" else (lambda: None)
                    for _ in range(20):  # settle: the first cycles open files, fill pools
                        cycle(pt, gap)
                    total = sum(cycle(pt, gap) for _ in range(a.cycles))
                    res[(mode, tag, heat)].append(total / a.cycles)
                pt.shutdown()
    print(
        "timer_cold_cost: python %s, %d CPU(s), %d cycles x %d rounds, %d calls per cycle (SGLang v2's shape); "
        "cold = %d generated-function calls over %d objects between two timer calls; * = stand-in events"
        % (sys.version.split()[0], os.cpu_count() or 0, a.cycles, a.rounds, CALLS, a.scrub, a.objects)
    )
    print(
        "  time inside the timer calls per cycle, median over rounds (the clock reads around each call included)"
    )
    print(
        "  mode                   hot us/cycle  cold us/cycle  cold/hot  cold ns/call"
        "  cold minus off, us/cycle: median of the rounds' differences [IQR]"
    )
    off_rounds = res[("off", "", "cold")] if "off" in base_modes else None
    for m, tag in sorted(modes, key=lambda mt: (base_modes.index(mt[0]), mt[1])):
        hot, cold = statistics.median(res[(m, tag, "hot")]), statistics.median(res[(m, tag, "cold")])
        paired = ""
        if off_rounds:  # each round ran every mode once, interleaved: difference per round
            diffs = sorted((c - o) / 1e3 for c, o in zip(res[(m, tag, "cold")], off_rounds))
            q = statistics.quantiles(diffs, n=4) if len(diffs) > 1 else [diffs[0]] * 3
            paired = "%8.2f [%.2f .. %.2f]" % (statistics.median(diffs), q[0], q[2])
        print(
            "  %-21s %12.2f %14.2f %9.2f %13.0f  %s"
            % (
                m + tag,
                hot / 1e3,
                cold / 1e3,
                cold / hot if hot else float("nan"),
                cold / CALLS,
                paired,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
