"""Chrome/Perfetto trace-event JSON: one process per rank, a CPU lane and a GPU lane each.

Host spans come straight from perf_counter_ns, mapped to wall time through each file's
header so that ranks line up. The GPU lane has no common clock with the host (the runtime
adds no synchronisation), so device spans are laid out from the device offsets the runtime
recorded (each phase's start relative to its cycle's start, and each cycle's start relative
to the previous one) and the whole chain is shifted as little as possible so that no cycle
starts on the GPU before the host began it. Distances between GPU spans are exact; their
position against the CPU lane is a lower bound of the real queueing lag.
"""

from __future__ import annotations

from patchkit.report.load import ProcessTiming

CPU_TID = 1
GPU_TID = 2


def _gpu_cycle_starts(proc: ProcessTiming, wall) -> dict[int, int]:
    """Wall-clock ns of each cycle's device start, per chain of consecutive cycles."""
    starts: dict[int, int] = {}
    chain: list[tuple[int, int]] = []  # (cycle index, device ns from chain start)

    def close():
        if chain:
            shift = max(wall(host_t0[idx]) - dev for idx, dev in chain)
            for idx, dev in chain:
                starts[idx] = dev + shift
        chain.clear()

    host_t0 = {c["cycle"]: c["t0"] for c in proc.cycles}
    prev = None
    for c in sorted(proc.cycles, key=lambda c: c["cycle"]):
        if c.get("dev_ns") is None:
            close()
            prev = None
            continue
        gap = c.get("dev_gap_ns")
        if prev is None or gap is None or c["cycle"] != prev + 1:
            close()
            chain.append((c["cycle"], 0))
        else:
            chain.append((c["cycle"], chain[-1][1] + gap))
        prev = c["cycle"]
    close()
    return starts


def _span(name, cat, pid, tid, start_ns, dur_ns, origin_ns, args):
    return {"name": name, "cat": cat, "ph": "X", "pid": pid, "tid": tid,
            "ts": (start_ns - origin_ns) / 1000.0, "dur": max(dur_ns, 0) / 1000.0, "args": args}


def _meta(name, pid, tid, value):
    key = "name" if name.endswith("_name") else "sort_index"
    event = {"name": name, "ph": "M", "pid": pid, "args": {key: value}}
    if tid is not None:
        event["tid"] = tid
    return event


def build_trace(procs: list[ProcessTiming]) -> dict:
    """The trace as a dict with `traceEvents` (write it with json.dump)."""
    origin = min(p.header["clock"]["wall_t0_ns"] for p in procs)
    events: list[dict] = []
    for index, proc in enumerate(procs):
        pid = index  # one trace process per timing file; ranks sort first
        label = f"rank {proc.rank} (pid {proc.header.get('pid')}, {proc.header.get('host')})"
        events += [_meta("process_name", pid, None, label),
                   _meta("process_sort_index", pid, None, index),
                   _meta("thread_name", pid, CPU_TID, "CPU (host)"),
                   _meta("thread_sort_index", pid, CPU_TID, 0)]
        has_gpu = any(c.get("dev_ns") is not None for c in proc.cycles) or \
            any(r.get("dev_ns") is not None for r in proc.phases)
        if has_gpu:
            events += [_meta("thread_name", pid, GPU_TID, f"GPU ({proc.mode})"),
                       _meta("thread_sort_index", pid, GPU_TID, 1)]
        wall = proc.wall_ns
        gpu_start = _gpu_cycle_starts(proc, wall)
        for c in proc.cycles:
            args = {"cycle": c["cycle"], **(c.get("attrs") or {})}
            args["host_ms"] = c["host_ns"] / 1e6
            if c.get("dev_ns") is not None:
                args["dev_ms"] = c["dev_ns"] / 1e6
            name = f"cycle {c['cycle']}"
            events.append(_span(name, "cycle", pid, CPU_TID, wall(c["t0"]), c["host_ns"],
                                origin, args))
            if c["cycle"] in gpu_start:
                events.append(_span(name, "cycle", pid, GPU_TID, gpu_start[c["cycle"]],
                                    c["dev_ns"], origin, args))
        for r in proc.phases:
            args = {"cycle": r.get("cycle"), "depth": r.get("depth"), "parent": r.get("parent"),
                    "graph": r.get("graph", False), "captured": r.get("captured", False),
                    **(r.get("attrs") or {})}
            if r.get("host_ns") is not None:
                args["host_ms"] = r["host_ns"] / 1e6
            if r.get("dev_ns") is not None:
                args["dev_ms"] = r["dev_ns"] / 1e6
            if r.get("t0") is not None:
                events.append(_span(r["name"], "phase", pid, CPU_TID, wall(r["t0"]),
                                    r["host_ns"], origin, args))
            if r.get("dev_ns") is None:
                continue
            cyc = r.get("cycle")
            if cyc in gpu_start and r.get("dev_off_ns") is not None:
                start = gpu_start[cyc] + r["dev_off_ns"]
            elif r.get("t0") is not None:
                start = wall(r["t0"])  # outside a cycle: placed at its host start
                args["gpu_position"] = "host start (no device anchor)"
            else:
                continue
            events.append(_span(r["name"], "phase", pid, GPU_TID, start, r["dev_ns"], origin,
                                args))
    # Viewers nest "X" events by containment; sorting by (ts, -dur) keeps parents first.
    spans = sorted((e for e in events if e["ph"] == "X"),
                   key=lambda e: (e["pid"], e["tid"], e["ts"], -e["dur"]))
    metas = [e for e in events if e["ph"] == "M"]
    return {"traceEvents": metas + spans, "displayTimeUnit": "ms",
            "otherData": {"source": "patchkit phase timer",
                          "gpu_lane": "device offsets; aligned no earlier than host start"}}
