"""Validate the phase timer on a CUDA GPU against torch.profiler (run on the H200).

A cycle of 10 phases of known GPU work, shaped like one EAGLE decode cycle: small prep ops,
a draft parent holding a CUDA-graph replay (4 captured draft steps) and a tree-build matmul,
a verify parent with a large forward and a logits matmul, an accept phase with a host sync
inside (.item()), a draft-extend forward and a launch-bound tail of tiny kernels.

Measured side by side in one process:
  1. wall time per cycle in off / events / sync modes, interleaved block by block (overhead);
  2. the host cost of one cycle of timer calls with no GPU work, per mode, and in events
     mode with torch.Event against torch.cuda.Event and with/without shared marks
     (PATCHKIT_TIMER_SHARE_NS), side by side;
  2d. the A/B switch of the runtime itself (PATCHKIT_TIMER_AB): events and off blocks
     alternating in one timer, reported by patchkit.report as summary.json `overhead`;
  3. a profiled events run: each phase also wrapped in torch.profiler.record_function, so
     per-phase device time from CUDA events is compared with the profiler's GPU annotation
     span and the sum of its kernel times, for the very same cycles;
  4. sum of top-level phases vs the cycle (device time), and the capture guard (timer calls
     inside the captured graph are skipped);
  5. experimental: PATCHKIT_TIMER_GRAPH_STEPS (torch.cuda.Event(external=True)) timing of
     the 4 steps inside the captured graph, when this torch's Event accepts external=.

Usage: python bench/gpu_timer_bench.py --out DIR   (writes DIR/gpu_timer_bench.txt and the
report of the events run under DIR/report/)
"""

from __future__ import annotations

import argparse
import inspect
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from patchkit.timing import phase_timer as pt  # noqa: E402

LINES: list[str] = []


def say(line: str = "") -> None:
    print(line, flush=True)
    LINES.append(line)


class Workload:
    """Tensors and the per-phase GPU work; sizes chosen so that most phases exceed 1 ms."""

    def __init__(self, dev="cuda", dt=torch.bfloat16):
        g = torch.Generator(device=dev).manual_seed(0)
        r = lambda *s: torch.randn(*s, device=dev, dtype=dt, generator=g) * 0.02  # noqa: E731
        self.big = r(8192, 8192)
        self.act = r(8192, 8192)
        self.wide = r(8192, 6144)
        self.logit_w = r(8192, 2048)
        self.draft_w = r(4096, 4096)
        self.draft_in = r(8192, 4096)
        self.draft_out = torch.empty_like(self.draft_in)
        self.vec = r(64 * 1024 * 1024)
        self.small = r(4096)
        self.graph = None
        self.kept_accepts: list = []
        self.profiling = False

    # every phase goes through here; while a profiler records, the runtime itself opens a
    # record_function range per phase (and per cycle): section 3 reads those
    def phase(self, name, fn, **attrs):
        pt.begin(name, **attrs)
        out = fn()
        pt.end(name)
        return out

    def draft_steps(self):
        h = self.draft_in
        for _ in range(4):
            pt.begin("draft_step")
            h = torch.tanh(h @ self.draft_w)
            pt.end("draft_step")
        self.draft_out.copy_(h)

    def capture(self):
        """Warm up on a side stream, then capture the draft steps into a CUDA graph."""
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self.draft_steps()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.draft_steps()
        torch.cuda.synchronize()
        self.graph = graph

    def cycle(self):
        pt.cycle_begin(kind="decode", batch_size=8)
        self.phase("prep", lambda: self.vec.mul_(0.5).add_(0.1))
        pt.begin("draft")
        self.phase("draft_forward", self.graph.replay, graph=True)
        self.phase("build_tree", lambda: self.big @ self.wide)
        pt.end("draft")
        pt.begin("verify")
        hidden = self.phase("verify_forward", lambda: ((self.act @ self.big) @ self.big) @ self.big)
        scores = self.phase("logits", lambda: torch.softmax(hidden @ self.logit_w, dim=-1))
        pt.end("verify")

        def accept():
            n = (scores[:64, 0] > scores[:64, 1]).sum()
            k = int(n.item())  # the host sync inside a phase, as real acceptance code does
            return (scores[: 8 + k % 8, 2] > 0).sum()

        accepted = self.phase("accept", accept)
        self.kept_accepts.append(accepted)
        self.phase("draft_extend", lambda: (self.act @ self.big) @ self.big)

        def free_slots():
            x = self.small
            for _ in range(20):
                x = x * 1.0001
            return x

        self.phase("free_slots", free_slots)
        pt.cycle_end(accepted=accepted)


def run_cycles(w: Workload, n: int) -> float:
    """Wall seconds for n cycles, synchronised at both ends."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        w.cycle()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def load(dir_: Path):
    """Phase, cycle and note records of every file, device times merged in (events mode
    writes them in later "dev" records), each file's stats record last."""
    from patchkit.report import load_timing_dir

    recs = []
    for proc in load_timing_dir(dir_):
        recs += proc.phases + proc.cycles + proc.notes
        if proc.stats:
            recs.append(proc.stats)
    return recs


def profiler_phases(trace_path: Path):
    """Per annotation (phase) occurrence: its GPU span and the kernel time inside it, in ns."""
    events = json.loads(trace_path.read_text())["traceEvents"]
    annots = [e for e in events if e.get("cat") == "gpu_user_annotation"]
    kernels = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    )
    starts = [k[0] for k in kernels]
    import bisect

    out: dict[str, list[tuple[float, float]]] = {}
    for a in annots:
        lo, hi = a["ts"], a["ts"] + a["dur"]
        i = bisect.bisect_left(starts, lo - 1e-3)
        busy = 0.0
        while i < len(kernels) and kernels[i][0] <= hi + 1e-3:
            s, e = kernels[i]
            busy += max(0.0, min(e, hi) - max(s, lo))
            i += 1
        out.setdefault(a["name"], []).append((a["dur"] * 1e3, busy * 1e3))
    return out, len(kernels)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--blocks", type=int, default=80)
    ap.add_argument("--cycles", type=int, default=10, help="cycles per block")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="ptbench-"))

    dev = torch.cuda.get_device_name()
    ext = "external" in inspect.signature(torch.cuda.Event.__new__).parameters
    say(
        f"gpu_timer_bench: {dev}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
        f"Event(external=) supported: {ext}"
    )
    w = Workload()
    pt.configure(mode="events", directory=str(work / "capture"), sample=1)
    w.capture()  # timer calls inside the capture must be skipped, the warm-up ones recorded
    pt.shutdown()
    cap = load(work / "capture")
    skipped = cap[-1]["skipped_capturing"]
    warm_steps = sum(1 for r in cap if r.get("name") == "draft_step")
    say(
        f"capture guard: {skipped} timer calls skipped while capturing (expect 4), "
        f"{warm_steps} warm-up steps recorded outside the capture (expect 4)"
    )

    pt.configure(mode="off")
    run_cycles(w, 20)  # warm-up: cuBLAS handles, clocks

    # 1. overhead: short blocks of cycles, the three modes interleaved block by block, each
    #    mode's timer kept alive across blocks (as in a long-running server)
    timers = {
        "off": None,
        "events": pt._TIMERS["events"]("events", str(work / "events-blocks"), False, 512, 5.0),
        "cycle-only": pt._TIMERS["events"]("events", str(work / "cycle-only"), False, 512, 5.0),
        "sync": pt._TIMERS["sync"]("sync", str(work / "sync-blocks"), False, 512, 5.0),
    }

    timers["cycle-only"].in_cycle = (pt._noop, pt._noop)  # what a timed cycle binds

    def bind(mode):
        pt._bind(timers[mode])
        if mode == "cycle-only":  # events timer on the cycle markers alone: per-cycle cost
            pt.begin = pt.end = pt._noop

    modes = ("off", "events", "cycle-only", "sync")
    walls = {m: [] for m in modes}
    for block in range(args.blocks):
        for mode in modes[block % 4 :] + modes[: block % 4]:  # rotate the order
            bind(mode)
            walls[mode].append(run_cycles(w, args.cycles) / args.cycles * 1e3)
    pt._bind(None)
    for mode in ("events", "cycle-only", "sync"):
        timers[mode].flush(final=True)
    med = {m: statistics.median(v) for m, v in walls.items()}
    mean = {m: statistics.mean(v) for m, v in walls.items()}
    paired = [(e - o) / o * 100 for e, o in zip(walls["events"], walls["off"])]
    paired_sync = [(e - o) / o * 100 for e, o in zip(walls["sync"], walls["off"])]
    paired_cyc = [(e - o) / o * 100 for e, o in zip(walls["cycle-only"], walls["off"])]
    events_overhead = statistics.median(paired)
    say()
    say(
        f"1. wall time per cycle: {args.blocks} blocks x {args.cycles} cycles per mode, modes "
        f"interleaved block by block (10 phases + cycle per cycle)"
    )
    say(f"   {'mode':8} {'median ms':>10} {'mean ms':>9} {'paired vs off (median of blocks)':>34}")
    say(f"   {'off':8} {med['off']:10.3f} {mean['off']:9.3f}")
    say(f"   {'events':8} {med['events']:10.3f} {mean['events']:9.3f} {events_overhead:+33.2f}%")
    say(
        f"   {'cyc-only':8} {med['cycle-only']:10.3f} {mean['cycle-only']:9.3f} "
        f"{statistics.median(paired_cyc):+33.2f}%   (events timer, cycle markers only)"
    )
    say(f"   {'sync':8} {med['sync']:10.3f} {mean['sync']:9.3f} {statistics.median(paired_sync):+33.2f}%")
    q = statistics.quantiles(paired, n=4)
    say(
        f"   events-off per block: quartiles {q[0]:+.2f}% / {q[1]:+.2f}% / {q[2]:+.2f}%; "
        f"mean {statistics.mean(paired):+.2f}%; off-mode blocks spread (p10-p90) "
        f"{(statistics.quantiles(walls['off'], n=10)[8] - statistics.quantiles(walls['off'], n=10)[0]) / med['off'] * 100:.2f}%"
    )

    # 2. host cost of the timer calls alone (no GPU work), per cycle of 10 phases
    def empty_cycle():
        pt.cycle_begin(batch_size=8)
        for name in ("a", "b", "c", "d", "e"):
            pt.begin(name)
            pt.begin(name + "_in")
            pt.end(name + "_in")
            pt.end(name)
        pt.cycle_end(accepted=3)

    def busy_cycle():
        """The same calls with a tiny kernel inside each inner phase (no sharing there)."""
        pt.cycle_begin(batch_size=8)
        for name in ("a", "b", "c", "d", "e"):
            pt.begin(name)
            pt.begin(name + "_in")
            w.small.add_(1.0)
            pt.end(name + "_in")
            pt.end(name)
        pt.cycle_end(accepted=3)

    variants = {  # label: (configure() arguments, cycle)
        "off": (dict(mode="off"), empty_cycle),
        "host": (dict(mode="host"), empty_cycle),
        "sync": (dict(mode="sync"), empty_cycle),
        "events torch.Event": (dict(mode="events", event_api="torch.Event"), empty_cycle),
        "events torch.cuda.Event": (dict(mode="events", event_api="torch.cuda.Event"), empty_cycle),
        "events torch.Event, no sharing": (
            dict(mode="events", event_api="torch.Event", share_ns=0),
            empty_cycle,
        ),
        "events torch.cuda.Event, no sharing": (
            dict(mode="events", event_api="torch.cuda.Event", share_ns=0),
            empty_cycle,
        ),
        "events torch.Event, sample 8": (
            dict(mode="events", event_api="torch.Event", sample=8, seed=1),
            empty_cycle,
        ),
        "host, sample 8": (dict(mode="host", sample=8, seed=1), empty_cycle),
        "off + kernels": (dict(mode="off"), busy_cycle),
        "events torch.Event + kernels": (dict(mode="events", event_api="torch.Event"), busy_cycle),
        "events torch.cuda.Event + kernels": (dict(mode="events", event_api="torch.cuda.Event"), busy_cycle),
    }
    rounds = {label: [] for label in variants}
    for rnd in range(5):  # interleaved rounds, the fastest kept (least disturbed)
        labels = list(variants)
        for label in labels[rnd % len(labels) :] + labels[: rnd % len(labels)]:
            kwargs, fn = variants[label]
            # sample=1 unless the variant samples: every cycle timed, not the runtime's budget
            kwargs = {"sample": 1, **kwargs}
            pt.configure(directory=str(work / f"empty-{rnd}-{labels.index(label)}"), **kwargs)
            for _ in range(200):
                fn()
            torch.cuda.synchronize()
            t0 = time.perf_counter_ns()
            for _ in range(2000):
                fn()
            rounds[label].append((time.perf_counter_ns() - t0) / 2000 / 1e3)
            torch.cuda.synchronize()
            pt.shutdown()
    host_cost = {label: min(v) for label, v in rounds.items()}
    say()
    say(
        "2. host cost of one cycle of timer calls (10 begin/end pairs + cycle = 22 calls), "
        "fastest of 5 interleaved rounds; '+ kernels': one tiny kernel in each inner phase, "
        "timer cost = minus 'off + kernels'"
    )
    for label, us in host_cost.items():
        extra = ""
        if label.endswith("+ kernels") and label != "off + kernels":
            net = us - host_cost["off + kernels"]
            extra = f"   timer: {net:7.2f} us/cycle ({net * 1e3 / 22:.0f} ns per call)"
            say(f"   {label:38} {us:8.2f} us/cycle{extra}")
            continue
        say(f"   {label:38} {us:8.2f} us/cycle  ({us * 1e3 / 22:.0f} ns per call)")
    ratio = host_cost["events torch.cuda.Event"] / host_cost["events torch.Event"]
    say(
        f"   events host cost per call: torch.Event {host_cost['events torch.Event'] * 1e3 / 22:.0f}"
        f" ns vs torch.cuda.Event {host_cost['events torch.cuda.Event'] * 1e3 / 22:.0f} ns "
        f"({ratio:.2f}x); goal <= 2000 ns"
    )
    say(
        f"   -> events-mode host cost is "
        f"{host_cost['events torch.Event'] / (med['off'] * 1e3) * 100:.3f}% "
        f"of a {med['off']:.2f} ms cycle"
    )

    # 2d. the runtime's own A/B switch on the workload's cycle
    ab_dir = work / "ab"
    ab_n = max(args.cycles, 2)
    pt.configure(mode="events", directory=str(ab_dir), ab=ab_n, sample=1)
    run_cycles(w, 2 * ab_n * args.blocks)
    pt.shutdown()
    from patchkit.report import build_report as _build

    ab_summary = _build(
        ab_dir, out / "report-ab", chart=False, meta={"bench": "gpu_timer_bench, PATCHKIT_TIMER_AB run (2d)"}
    )
    ov = ab_summary.overhead
    say()
    if not ov or not ov["pairs"]:
        say(f"2d. A/B inside one timer: no pairs of blocks ({ov})")
    else:
        say(
            f"2d. A/B inside one timer (PATCHKIT_TIMER_AB={ab_n}, {2 * ab_n * args.blocks} "
            f"cycles): {ov['pairs']} pairs, paired median {ov['median_pct']:+.2f}% of the cycle "
            f"period (IQR {ov['iqr_pct'][0]:+.2f}% .. {ov['iqr_pct'][1]:+.2f}%), "
            f"{ov['timed_period_ms']:.3f} ms timed vs {ov['off_period_ms']:.3f} ms off; "
            f"compare section 1's events-vs-off {events_overhead:+.2f}%"
        )

    # 2b. what the calls cost, one by one (host ns per call)
    def per_call(fn, n=20000):
        fn()
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        return (time.perf_counter_ns() - t0) / n

    ce, ge = torch.cuda.Event(enable_timing=True), torch.Event(device="cuda", enable_timing=True)
    ce2, ge2 = torch.cuda.Event(enable_timing=True), torch.Event(device="cuda", enable_timing=True)
    ce.record()
    ge.record()
    ce2.record()
    ge2.record()
    torch.cuda.synchronize()
    costs = {
        "time.perf_counter_ns()": per_call(time.perf_counter_ns),
        "torch.cuda.is_current_stream_capturing()": per_call(torch.cuda.is_current_stream_capturing),
        "torch._C._cuda_isCurrentStreamCapturing()": per_call(torch._C._cuda_isCurrentStreamCapturing),
        "torch.cuda.current_stream()": per_call(torch.cuda.current_stream),
        "torch.cuda.Event.record()": per_call(ce.record, 5000),
        "torch.Event.record()": per_call(ge.record, 5000),
    }
    torch.cuda.synchronize()
    costs["torch.cuda.Event.query() (done)"] = per_call(ce.query)
    costs["torch.Event.query() (done)"] = per_call(ge.query)
    costs["torch.cuda.Event.elapsed_time()"] = per_call(lambda: ce.elapsed_time(ce2))
    costs["torch.Event.elapsed_time()"] = per_call(lambda: ge.elapsed_time(ge2))
    say()
    say("2b. host cost of the primitives, ns per call")
    for k, v in costs.items():
        say(f"   {k:44} {v:8.0f}")

    # 2c. GPU-side cost of one timing event: tiny kernels queued behind big matmuls (so the
    #     GPU, not the host, sets the pace), with and without an event record after each
    def gpu_tail(with_events, n=400):
        x = torch.zeros(1024, device="cuda")
        evs = [torch.Event(device="cuda", enable_timing=True) for _ in range(64)]
        a = torch.Event(device="cuda", enable_timing=True)
        b = torch.Event(device="cuda", enable_timing=True)
        torch.cuda.synchronize()
        for _ in range(8):
            w.big @ w.big
        a.record()
        for i in range(n):
            x.add_(1.0)
            if with_events:
                evs[i % 64].record()
        b.record()
        torch.cuda.synchronize()
        return a.elapsed_time(b) / n * 1e3

    tails = {flag: statistics.median(gpu_tail(flag) for _ in range(7)) for flag in (False, True)}
    say()
    say(
        f"2c. GPU time per tiny kernel, queued: {tails[False]:.2f} us alone, {tails[True]:.2f} us "
        f"with a timing event after each -> about {tails[True] - tails[False]:.2f} us of GPU time "
        f"per event ({22 * (tails[True] - tails[False]):.0f} us per cycle of 22 events = "
        f"{22 * (tails[True] - tails[False]) / (med['off'] * 1e3) * 100:.2f}% of a cycle)"
    )

    # 3. profiled events run: same cycles seen by both
    prof_dir = work / "events-profiled"
    pt.configure(mode="events", directory=str(prof_dir), sample=1)
    w.profiling = True
    n_prof = 30
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        run_cycles(w, n_prof)
    w.profiling = False
    pt.shutdown()
    trace_path = work / "profiler_trace.json"
    prof.export_chrome_trace(str(trace_path))
    pphase, n_kernels = profiler_phases(trace_path)
    say()
    say(
        f"3a. the runtime's own profiler ranges (this bench opens none): GPU annotations per "
        f"name in {n_prof} profiled cycles: " + ", ".join(f"{k} {len(v)}" for k, v in sorted(pphase.items()))
    )
    recs = load(prof_dir)
    phases = [r for r in recs if r["kind"] == "phase"]
    cycles = [r for r in recs if r["kind"] == "cycle"]
    say()
    say(
        f"3. per-phase device time, events mode vs torch.profiler ({n_prof} profiled cycles, "
        f"{n_kernels} GPU activities; span = annotation's first-kernel-start to last-kernel-end, "
        f"busy = kernel time inside it)"
    )
    say(
        f"   {'phase':16} {'n':>3} {'events ms':>10} {'prof span':>10} {'prof busy':>10} "
        f"{'ev/span':>8} {'ev/busy':>8}  goal(>1ms): within 5%"
    )
    order = [
        "prep",
        "draft_forward",
        "build_tree",
        "verify_forward",
        "logits",
        "accept",
        "draft_extend",
        "free_slots",
    ]
    ok_all = True
    for name in order:
        ev = [r["dev_ns"] / 1e6 for r in phases if r["name"] == name and r["dev_ns"] is not None]
        pp = pphase.get(name, [])
        if not ev:
            say(f"   {name:16} no events records")
            ok_all = False
            continue
        ev_mean = statistics.mean(ev)
        if pp:
            span = statistics.mean(p[0] for p in pp) / 1e6
            busy = statistics.mean(p[1] for p in pp) / 1e6
            r_span, r_busy = ev_mean / span, ev_mean / busy if busy else float("nan")
            verdict = ""
            if ev_mean > 1.0:
                good = abs(r_busy - 1) <= 0.05
                ok_all &= good
                verdict = "ok" if good else "MISS"
            say(
                f"   {name:16} {len(ev):3d} {ev_mean:10.4f} {span:10.4f} {busy:10.4f} "
                f"{r_span:8.3f} {r_busy:8.3f}  {verdict}"
            )
        else:
            say(f"   {name:16} {len(ev):3d} {ev_mean:10.4f} {'n/a':>10} {'n/a':>10}")
    say(f"   phases > 1 ms within 5% of the profiler's kernel time: {'yes' if ok_all else 'NO'}")

    # 4. sum of top-level phases vs cycle (device time), from the unprofiled events blocks
    ev_recs = load(work / "events-blocks")
    top_by_cycle: dict[int, int] = {}
    for r in ev_recs:
        if r["kind"] == "phase" and r["depth"] == 0 and r["cycle"] is not None:
            top_by_cycle[r["cycle"]] = top_by_cycle.get(r["cycle"], 0) + r["dev_ns"]
    ratios = [top_by_cycle[c["cycle"]] / c["dev_ns"] for c in ev_recs if c["kind"] == "cycle" and c["dev_ns"]]
    say()
    say(
        f"4. sum of top-level phase device times / cycle device time over {len(ratios)} cycles: "
        f"mean {statistics.mean(ratios) * 100:.2f}%, min {min(ratios) * 100:.2f}%, "
        f"max {max(ratios) * 100:.2f}%  (goal: within 2%)"
    )
    kept = [int(t.item()) for t in w.kept_accepts[-n_prof:]]
    got = [c["attrs"]["accepted"] for c in cycles]
    accepts_ok = kept == got
    say(
        f"   accepted= passed as a CUDA tensor, read back without a sync: "
        f"{'matches .item()' if accepts_ok else 'MISMATCH'} ({got[:5]}...)"
    )
    dev_lane = [r for r in phases if r["dev_off_ns"] is not None]
    say(f"   phases with a device offset in their cycle: {len(dev_lane)}/{len(phases)}")

    # 5. experimental: steps inside the captured graph via Event(external=True)
    say()
    if ext:
        gs_dir = work / "graph-steps"
        pt.configure(mode="events", directory=str(gs_dir), graph_steps=True, sample=1)
        w.capture()  # the capture now records external events between the draft steps
        for _ in range(30):
            w.cycle()
        pt.shutdown()
        recs = load(gs_dir)
        steps = [r for r in recs if r["kind"] == "phase" and r.get("captured")]
        fwd = [r for r in recs if r["kind"] == "phase" and r["name"] == "draft_forward"]
        stats = recs[-1]
        if steps:
            per = len(steps) / max(len(fwd), 1)
            step_ms = statistics.mean(r["dev_ns"] for r in steps) / 1e6
            fwd_ms = statistics.mean(r["dev_ns"] for r in fwd) / 1e6
            say(
                f"5. graph steps (experimental, Event(external=True)): {len(steps)} step records "
                f"for {len(fwd)} replays ({per:.1f} per replay, expect 4), stale {stats['stale_steps']}"
            )
            say(
                f"   mean step {step_ms:.4f} ms; 4 steps = {4 * step_ms:.4f} ms of a "
                f"{fwd_ms:.4f} ms replay ({4 * step_ms / fwd_ms * 100:.1f}%; the rest is the "
                f"final copy); profiler span of the replay above: "
                f"{statistics.mean(p[0] for p in pphase.get('draft_forward', [(0, 0)])) / 1e6:.4f} ms"
            )
        else:
            say(f"5. graph steps: no step records (stats {stats})")
        w.capture()  # back to a graph without timer events
    else:
        say("5. graph steps: this torch's Event has no external= (skipped)")

    # report of one events round (device times, GPU lane)
    from patchkit.report import build_report, render_table

    summary = build_report(
        work / "events-blocks",
        out / "report",
        meta={"bench": "gpu_timer_bench, events-mode blocks of section 1"},
    )
    say()
    say("report of the events-mode blocks of section 1 (patchkit.report):")
    for line in render_table(summary).splitlines():
        say("   " + line)
    say()
    say(
        "summary: events overhead %+.2f%% per cycle (goal < 0.5%%); phases > 1 ms within 5%% "
        "of profiler kernel time: %s; top-level sum / cycle: %.2f%% (goal within 2%%)"
        % (events_overhead, "yes" if ok_all else "no", statistics.mean(ratios) * 100)
    )
    (out / "gpu_timer_bench.txt").write_text("\n".join(LINES) + "\n")


if __name__ == "__main__":
    main()
