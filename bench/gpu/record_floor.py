"""What recording a CUDA event can cost from Python at best (run on the H200).

The goal is <= 2 us of host time per events-mode timer call; the runtime's call costs
~3.3 us hot on the H200, of which torch.Event.record() is ~1.6 us. This bench asks whether a
cheaper way to record exists before anyone writes one into the runtime: the same event record
through torch's two Event classes and through ctypes straight into the CUDA driver
(cuEventRecord on the current raw stream), and the bookkeeping a timer call adds around it,
each timed in the same process, in interleaved rounds (the spread over rounds is printed).

Usage: python bench/gpu/record_floor.py [--rounds 7] [--out FILE]
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import time

import torch


def per_call(fn, n):
    fn()
    t0 = time.perf_counter_ns()
    for _ in range(n):
        fn()
    return (time.perf_counter_ns() - t0) / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=5000)
    ap.add_argument("--out")
    args = ap.parse_args()
    lines = []

    def say(line=""):
        print(line, flush=True)
        lines.append(line)

    def save():
        if args.out:
            with open(args.out, "w") as f:
                f.write("\n".join(lines) + "\n")

    torch.cuda.init()
    dev = torch.cuda.current_device()
    cuda = ctypes.CDLL("libcuda.so.1")
    cu_record = cuda.cuEventRecord
    cu_record.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    cu_record.restype = ctypes.c_int
    ev_cls = torch.cuda.Event(enable_timing=True)
    ev_gen = torch.Event(device="cuda", enable_timing=True)
    ev_cls.record()
    handle = ctypes.c_void_p(ev_cls.cuda_event)
    raw_stream = torch._C._cuda_getCurrentRawStream
    stream_now = raw_stream(dev)
    perf = time.perf_counter_ns
    stack = []

    def ctypes_record():  # the current stream looked up at each call, as a timer would
        cu_record(handle, raw_stream(dev))

    def ctypes_record_cached():
        cu_record(handle, stream_now)

    def torch_event_call():  # roughly what one in-cycle timer call does around its record
        t0 = perf()
        ev_gen.record()
        stack.append([t0, perf()])
        stack.pop()

    def bare_call():
        t0 = perf()
        stack.append([t0, perf()])
        stack.pop()

    def ctypes_call():
        t0 = perf()
        cu_record(handle, raw_stream(dev))
        stack.append([t0, perf()])
        stack.pop()

    cases = {
        "time.perf_counter_ns()": perf,
        "torch._C._cuda_getCurrentRawStream(dev)": lambda: raw_stream(dev),
        "torch.cuda.Event.record()": ev_cls.record,
        "torch.Event.record()": ev_gen.record,
        "ctypes cuEventRecord, stream looked up": ctypes_record,
        "ctypes cuEventRecord, stream cached": ctypes_record_cached,
        "call shape: perf + list, no record": bare_call,
        "call shape: perf + torch.Event.record + list": torch_event_call,
        "call shape: perf + ctypes cuEventRecord + list": ctypes_call,
    }
    rc = cu_record(handle, stream_now)
    if rc != 0:
        raise SystemExit(f"cuEventRecord returned CUDA error {rc}")
    got = {k: [] for k in cases}
    names = list(cases)
    for rnd in range(args.rounds):  # rotated order, one round of every case at a time
        for name in names[rnd % len(names) :] + names[: rnd % len(names)]:
            got[name].append(per_call(cases[name], args.calls))
            torch.cuda.synchronize()
    say(
        f"record_floor: {torch.cuda.get_device_name()}, torch {torch.__version__}; ns per call, "
        f"{args.calls} calls per round, {args.rounds} interleaved rounds: median [min..max]"
    )
    for name, vals in got.items():
        say(f"   {name:48} {statistics.median(vals):7.0f} [{min(vals):.0f}..{max(vals):.0f}]")
    save()  # the figures first: the check below must not lose them
    # the ctypes path gives a correct timing: the same sleep kernel between two events recorded
    # through the driver and between two recorded by torch, both read through the driver
    # (torch's own elapsed_time() refuses events it did not record itself)
    cu_elapsed = cuda.cuEventElapsedTime
    cu_elapsed.argtypes = [ctypes.POINTER(ctypes.c_float), ctypes.c_void_p, ctypes.c_void_p]
    cu_elapsed.restype = ctypes.c_int

    def elapsed(a, b):
        ms = ctypes.c_float()
        err = cu_elapsed(ctypes.byref(ms), ctypes.c_void_p(a.cuda_event), ctypes.c_void_p(b.cuda_event))
        if err != 0:
            raise SystemExit(f"cuEventElapsedTime returned CUDA error {err}")
        return ms.value

    a, b, c, d = (torch.cuda.Event(enable_timing=True) for _ in range(4))
    torch.cuda._sleep(1000)  # the kernel's first launch loads its module (lazy loading)
    for ev in (a, b):  # torch creates its event at the first record: a handle to record into
        ev.record()
    torch.cuda.synchronize()
    for ev in (a, b):
        if ev is b:
            torch.cuda._sleep(10_000_000)
        err = cu_record(ctypes.c_void_p(ev.cuda_event), raw_stream(dev))
        if err != 0:
            raise SystemExit(f"cuEventRecord returned CUDA error {err}")
    c.record()
    torch.cuda._sleep(10_000_000)
    d.record()
    torch.cuda.synchronize()
    say(
        f"   check: one sleep kernel timed by ctypes-recorded events {elapsed(a, b):.3f} ms, "
        f"the same kernel by torch-recorded ones {elapsed(c, d):.3f} ms"
    )
    save()


if __name__ == "__main__":
    main()
