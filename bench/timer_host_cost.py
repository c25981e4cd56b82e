"""Host cost of the phase timer per call, by mode, side by side in one run (CPU).

A cycle here is what the SGLang series time: cycle_begin(kind=, batch_size=), 5 phases
each holding one nested phase (10 begin/end pairs) and cycle_end(accepted=): 22 calls.
No real work runs inside, so the figures are the timer's own host time.

Modes measured, rounds interleaved (the order rotates every round); the fastest round is
the figure (the least disturbed by other load on a shared machine), the median is shown:
  off          PATCHKIT_TIMER=off (the module functions are a no-op)
  ab-off       an off block of PATCHKIT_TIMER_AB (cycle host times only, no phases)
  host         host clock only; the cycle written at its cycle_end
  sync*        sync mode with a no-op synchronize (the Python side of sync mode)
  events*      events mode with a stand-in event class whose record/query/elapsed_time
               cost next to nothing: the Python side of events mode; on a GPU add the
               torch calls (bench/gpu_timer_bench.py measures those on the H200)
  events*+nvtx the same with PATCHKIT_TIMER_NVTX=1 and no-op range_push/range_pop
  host/N, events*/N  PATCHKIT_TIMER_SAMPLE=N: about one cycle in N timed, the others
               recorded with host times and attrs only (N = 4, 8, 16)
The same cycle is also run through the runtime of an earlier commit (--baseline, default
the runtime before its cheaper calls and sampling) for host and events*.

With --paired every mode is also run through the baseline's runtime ("MODE (before)"), in
the same interleaved rounds, and each round's now/before ratio of ns per cycle is reported
per mode (median and range over the rounds): the working tree against a commit, side by side.

Usage: python bench/timer_host_cost.py [--cycles 3000] [--rounds 7] [--baseline REV] [--paired]
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = ROOT / "patchkit" / "timing" / "phase_timer.py"
BASELINE_REV = "2961b29"  # the runtime before sampling and the in-cycle fast path
CALLS_PER_CYCLE = 22
# this thread's CPU time: on a shared machine the time other processes hold the CPU does
# not count (preemption still disturbs caches; the fastest round is kept as well)
_clock = time.thread_time_ns
SAMPLES = (4, 8, 16)


class StandInEvent:
    """The event API the runtime uses, at almost no cost: done as soon as recorded."""

    __slots__ = ("t",)

    def __init__(self, device=None, enable_timing=False, **kwargs):
        self.t = 0

    def record(self, stream=None):
        self.t = time.perf_counter_ns()  # the runtime's clock

    def query(self):
        return True

    def synchronize(self):
        pass

    def elapsed_time(self, other):
        return (other.t - self.t) / 1e6


def install_stand_in_torch():
    nvtx = types.SimpleNamespace(range_push=lambda name: None, range_pop=lambda: None)
    torch = types.ModuleType("torch")
    torch.__version__ = "stand-in"
    torch.Event = StandInEvent
    torch.cuda = types.SimpleNamespace(
        Event=StandInEvent,
        is_available=lambda: True,
        is_initialized=lambda: True,
        synchronize=lambda: None,
        get_device_name=lambda: "stand-in",
        nvtx=nvtx,
        is_current_stream_capturing=lambda: False,
    )
    sys.modules["torch"] = torch


def load_runtime(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def runtime_text(rev: str) -> str:
    """The runtime's source at git revision `rev`, or of the file `rev` where that is a file
    (OSError, CalledProcessError: neither)."""
    if Path(rev).is_file():
        return Path(rev).read_text(encoding="utf-8")
    return subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:patchkit/timing/phase_timer.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def baseline_runtime(rev: str, work: Path):
    """The runtime of git revision `rev` (or the file `rev`) loaded; None where unreadable."""
    try:
        text = runtime_text(rev)
    except (OSError, subprocess.CalledProcessError):
        return None
    path = work / "phase_timer_baseline.py"
    path.write_text(text)
    return load_runtime(path, "phase_timer_baseline")


def ab_off_block(pt, directory: Path):
    """An events timer with PATCHKIT_TIMER_AB, placed at the start of a (long) off block."""
    block = 1 << 30
    pt.configure(mode="events", directory=str(directory), ab=block, sample=1)
    pt._timer.cycle_no = block - 1


def one_cycle(pt):
    pt.cycle_begin(kind="decode", batch_size=8)
    for name, inner in (("a", "a_in"), ("b", "b_in"), ("c", "c_in"), ("d", "d_in"), ("e", "e_in")):
        pt.begin(name)
        pt.begin(inner)
        pt.end(inner)
        pt.end(name)
    pt.cycle_end(accepted=3)


def time_cycles(pt, n: int) -> float:
    """ns per cycle over n cycles."""
    t0 = _clock()
    for _ in range(n):
        one_cycle(pt)
    return (_clock() - t0) / n


def time_pairs(pt, n: int) -> float:
    """ns per begin+end pair inside one open cycle (the hot path, no write)."""
    pt.cycle_begin(kind="decode")
    t0 = _clock()
    for _ in range(n):
        pt.begin("x")
        pt.end("x")
    dt = _clock() - t0
    pt.cycle_end()
    return dt / n


def time_empty(pt, n: int) -> float:
    """ns per cycle with no phase inside: cycle_begin + cycle_end alone (the per-cycle part:
    start mark, attrs, formatting, resolution of an earlier cycle, the write)."""
    t0 = _clock()
    for _ in range(n):
        pt.cycle_begin(kind="decode", batch_size=8)
        pt.cycle_end(accepted=3)
    return (_clock() - t0) / n


def time_writes(work: Path, chunk: bytes, n: int) -> float:
    fd = os.open(work / "write-probe.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        t0 = _clock()
        for _ in range(n):
            os.write(fd, chunk)
        return (_clock() - t0) / n
    finally:
        os.close(fd)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=3000, help="cycles per measurement")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved rounds (median kept)")
    ap.add_argument("--baseline", default=BASELINE_REV, help="git revision (or file) of the old runtime")
    ap.add_argument(
        "--cuda",
        action="store_true",
        help="real torch with CUDA instead of the stand-in events (on a GPU host)",
    )
    ap.add_argument(
        "--paired",
        action="store_true",
        help="every mode through the baseline's runtime too; per-round now/before ratios",
    )
    args = ap.parse_args()
    if args.cuda:
        import torch

        torch.zeros(1, device="cuda")  # CUDA initialised: the runtime picks events
        torch.cuda.synchronize()
    else:
        install_stand_in_torch()
    work = Path(tempfile.mkdtemp(prefix="timer-cost-"))
    pt = load_runtime(RUNTIME, "phase_timer_now")
    old = baseline_runtime(args.baseline, work)

    # each set-up configures the runtime module it is given (the working tree's, or the
    # baseline's too); every cycle timed where the module takes a sample (without one a runtime
    # with a budget would sample them)
    def every_cycle(m):
        return {"sample": 1} if "sample" in inspect.signature(m.configure).parameters else {}

    configs = {
        "off": lambda m, w: m.configure(mode="off"),
        "ab-off": lambda m, w: ab_off_block(m, w / "ab"),
        "host": lambda m, w: m.configure(mode="host", directory=str(w / "host"), **every_cycle(m)),
        "sync*": lambda m, w: m.configure(mode="sync", directory=str(w / "sync"), **every_cycle(m)),
        "events*": lambda m, w: m.configure(mode="events", directory=str(w / "events"), **every_cycle(m)),
        "events*+nvtx": lambda m, w: m.configure(
            mode="events", directory=str(w / "nvtx"), nvtx=True, **every_cycle(m)
        ),
    }
    for n in SAMPLES:
        configs[f"host/{n}"] = lambda m, w, n=n: m.configure(
            mode="host", sample=n, seed=n, directory=str(w / f"host{n}")
        )
        configs[f"events*/{n}"] = lambda m, w, n=n: m.configure(
            mode="events", sample=n, seed=n, directory=str(w / f"ev{n}")
        )
    setups = {name: (lambda c=c: c(pt, work)) for name, c in configs.items()}
    modules = {name: pt for name in setups}
    # the baseline: every mode with --paired, else host and events* for the table's "before" rows
    paired = list(configs) if old is not None and args.paired else []
    for name in paired or (["host", "events*"] if old is not None else []):
        setups[f"{name} (before)"] = lambda c=configs[name]: c(old, work / "before")
        modules[f"{name} (before)"] = old
    cycle_ns = {m: [] for m in setups}
    pair_ns = {m: [] for m in setups}
    empty_ns = {m: [] for m in setups}
    writes = {}
    names = list(setups)
    for rnd in range(args.rounds):
        for mode in names[rnd % len(names) :] + names[: rnd % len(names)]:
            mod = modules[mode]
            setups[mode]()
            for _ in range(200):
                one_cycle(mod)  # warm: pool filled, names quoted, file open
            cycle_ns[mode].append(time_cycles(mod, args.cycles))
            timer = mod._timer
            if timer is not None and "writes" in timer.counts:
                writes[mode] = timer.counts["writes"] / (args.cycles + 200)
            if mode.split(" (")[0] != "ab-off" and "/" not in mode:
                pair_ns[mode].append(time_pairs(mod, args.cycles))
                empty_ns[mode].append(time_empty(mod, args.cycles))
            mod.shutdown()
            (old or pt).shutdown()
    pt.configure(mode="off")

    chunk = (work / "host").glob("*.jsonl")
    sample = next(chunk).read_bytes().splitlines(keepends=True)
    one = b"".join(sample[1:12])  # one cycle as host mode writes it: 10 phases + cycle
    write_ns = min(time_writes(work, one, args.cycles) for _ in range(5))

    torch = sys.modules["torch"]
    where = (
        f"torch {torch.__version__} on {torch.cuda.get_device_name()}: * = real CUDA events"
        if args.cuda
        else "* = stand-in events (no torch cost)"
    )
    print(
        f"timer_host_cost: python {sys.version.split()[0]}, {os.cpu_count()} CPU(s), "
        f"{args.cycles} cycles x {args.rounds} interleaved rounds; cycle = {CALLS_PER_CYCLE} "
        f"calls (10 phases); {where}"
    )
    print(
        "  best = fastest round (least disturbed by other load), median = middle round; "
        "times are this thread's CPU time (time.thread_time_ns)"
    )
    base = min(cycle_ns["off"])
    print(
        f"  {'mode':16} {'ns/call':>8} {'(median)':>9} {'us/cycle':>9} {'x off':>7} "
        f"{'pair ns':>8} {'empty us':>9} {'writes/cycle':>13}"
    )
    for mode in names:
        best, med = min(cycle_ns[mode]), statistics.median(cycle_ns[mode])
        pair = f"{min(pair_ns[mode]):8.0f}" if pair_ns[mode] else f"{'-':>8}"
        empty = f"{min(empty_ns[mode]) / 1e3:9.2f}" if empty_ns[mode] else f"{'-':>9}"
        w = writes.get(mode)
        print(
            f"  {mode:16} {best / CALLS_PER_CYCLE:8.0f} {med / CALLS_PER_CYCLE:9.0f} "
            f"{best / 1e3:9.2f} {best / base:7.1f} {pair} {empty} "
            f"{'-' if w is None else f'{w:.3f}':>13}"
        )
    print(
        f"  one os.write of a host-mode cycle ({len(one)} bytes, O_APPEND): {write_ns:.0f} ns "
        f"= {write_ns / CALLS_PER_CYCLE:.0f} ns per call of the cycle"
    )
    if old is None:
        print(f"  (no baseline: git revision {args.baseline} not readable)")
    print("  pair ns: one begin+end inside an open cycle (the hot path: no write, no resolve)")
    print(
        "  empty us: cycle_begin + cycle_end with no phase (start mark, attrs, formatting, "
        "resolution, the write)"
    )
    print(
        "  writes/cycle: os.write calls per cycle (a timed cycle is written at its cycle_end; untimed and"
        " off-block cycles go with the next write, or the idle flusher's)"
    )
    print("  sampled, per cycle (us) against full timing of the same mode:")
    for kind in ("host", "events*"):
        full = min(cycle_ns[kind])
        row = "  ".join(
            f"/{n}: {min(cycle_ns[f'{kind}/{n}']) / 1e3:5.2f} ({min(cycle_ns[f'{kind}/{n}']) / full:4.2f}x)"
            for n in SAMPLES
        )
        print(f"    {kind:8} /1: {full / 1e3:5.2f}  {row}")
    if paired:
        print("  paired: each round's now/before ns per cycle, median [min, max] over the rounds:")
        for mode in paired:
            ratios = [a / b for a, b in zip(cycle_ns[mode], cycle_ns[f"{mode} (before)"])]
            print(
                f"    {mode:16} {statistics.median(ratios):6.3f} [{min(ratios):.3f}, {max(ratios):.3f}]"
                f"  ratios: {' '.join(f'{r:.4f}' for r in ratios)}"
            )


if __name__ == "__main__":
    main()
