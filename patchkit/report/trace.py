"""Chrome/Perfetto trace-event JSON: one process per rank, a CPU lane and a GPU lane each.

Host spans come straight from perf_counter_ns. When every file was written on one host
since one boot and perf_counter_ns is CLOCK_MONOTONIC there (the header's host_impl and
boot_id say so), all files share that clock and are placed on it directly, one offset for
all: ranks line up exactly. Otherwise each file's perf_counter_ns is mapped to wall time
through its own header (aligned as well as the hosts' wall clocks agree).
`otherData.clock_alignment` says which was used. Several files of one rank (a restarted
process) are lanes of that rank's process. The GPU lane has no common clock with the host
(the runtime adds no synchronisation), so device spans are laid out from the device offsets the runtime
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
    return {
        "name": name,
        "cat": cat,
        "ph": "X",
        "pid": pid,
        "tid": tid,
        "ts": (start_ns - origin_ns) / 1000.0,
        "dur": max(dur_ns, 0) / 1000.0,
        "args": args,
    }


def _meta(name, pid, tid, value):
    key = "name" if name.endswith("_name") else "sort_index"
    event = {"name": name, "ph": "M", "pid": pid, "args": {key: value}}
    if tid is not None:
        event["tid"] = tid
    return event


def shared_monotonic(procs: list[ProcessTiming]) -> bool:
    """True when all files' perf_counter_ns are one CLOCK_MONOTONIC (one host, one boot)."""
    seen = set()
    for p in procs:
        clock = p.header.get("clock") or {}
        if "CLOCK_MONOTONIC" not in (clock.get("host_impl") or "") or not clock.get("boot_id"):
            return False
        seen.add((p.header.get("host"), clock["boot_id"]))
    return len(seen) == 1


def clock_maps(procs: list[ProcessTiming]):
    """(name of the alignment, per file a function perf_counter_ns -> common ns)."""
    if shared_monotonic(procs):
        ref = procs[0].header["clock"]
        offset = ref["wall_t0_ns"] - ref["host_t0_ns"]
        return "shared monotonic clock", [lambda t, o=offset: t + o for _ in procs]
    return "wall clock per process", [p.wall_ns for p in procs]


def build_trace(procs: list[ProcessTiming], stalls: list[set[int]] | None = None) -> dict:
    """The trace as a dict with `traceEvents` (write it with json.dump).

    `stalls`: per process, the indices of its stall cycles (patchkit.report.stalls): their
    cycle spans are named "... STALL" with args stall: true, and an instant event "stall"
    marks each on the CPU lane. Cycles whose phases sampled timing left untimed carry
    args timed: false."""
    alignment, maps = clock_maps(procs)
    origin = min(m(p.header["clock"]["host_t0_ns"]) for p, m in zip(procs, maps))
    events: list[dict] = []
    ranks = sorted({p.rank for p in procs})
    lanes_of_rank: dict[int, int] = {}
    stalls = stalls or [set() for _ in procs]
    for proc, wall, stall_set in zip(procs, maps, stalls):
        pid = proc.rank  # one trace process per rank
        lane = lanes_of_rank.get(pid, 0)
        lanes_of_rank[pid] = lane + 1
        cpu_tid, gpu_tid = CPU_TID + 2 * lane, GPU_TID + 2 * lane
        events += _lane_meta(proc, lane, ranks.index(pid))
        gpu_start = _gpu_cycle_starts(proc, wall)
        lanes = (pid, cpu_tid, gpu_tid)
        events += _cycle_events(proc, wall, origin, lanes, gpu_start, stall_set)
        events += _phase_events(proc, wall, origin, lanes, gpu_start)
    # Viewers nest "X" events by containment; sorting by (ts, -dur) keeps parents first.
    spans = sorted(
        (e for e in events if e["ph"] in ("X", "i")),
        key=lambda e: (e["pid"], e["tid"], e["ts"], -e.get("dur", 0.0)),
    )
    metas = [e for e in events if e["ph"] == "M"]
    return {
        "traceEvents": metas + spans,
        "displayTimeUnit": "ms",
        "otherData": {
            "source": "patchkit phase timer",
            "clock_alignment": alignment,
            "gpu_lane": "device offsets; aligned no earlier than host start",
        },
    }


def _lane_meta(proc: ProcessTiming, lane: int, rank_index: int) -> list[dict]:
    """The metadata events naming a process's lanes (CPU, and GPU where it has device times);
    the first process of a rank also names and orders the rank."""
    pid = proc.rank
    cpu_tid, gpu_tid = CPU_TID + 2 * lane, GPU_TID + 2 * lane
    events: list[dict] = []
    suffix = "" if lane == 0 else f" pid {proc.header.get('pid')}"
    if lane == 0:
        label = f"rank {proc.rank} (pid {proc.header.get('pid')}, {proc.header.get('host')})"
        events += [
            _meta("process_name", pid, None, label),
            _meta("process_sort_index", pid, None, rank_index),
        ]
    events += [
        _meta("thread_name", pid, cpu_tid, "CPU (host)" + suffix),
        _meta("thread_sort_index", pid, cpu_tid, 2 * lane),
    ]
    has_gpu = any(c.get("dev_ns") is not None for c in proc.cycles) or any(
        r.get("dev_ns") is not None for r in proc.phases
    )
    if has_gpu:
        events += [
            _meta("thread_name", pid, gpu_tid, f"GPU ({proc.mode})" + suffix),
            _meta("thread_sort_index", pid, gpu_tid, 2 * lane + 1),
        ]
    return events


def _cycle_events(
    proc: ProcessTiming,
    wall,
    origin: float,
    lanes: tuple[int, int, int],
    gpu_start: dict,
    stall_set: set[int],
) -> list[dict]:
    """A span per cycle on the CPU lane (and the GPU lane where it has a device start), an
    instant "stall" event marking each stall cycle."""
    pid, cpu_tid, gpu_tid = lanes
    events: list[dict] = []
    for c in proc.cycles:
        args = {"cycle": c["cycle"], **(c.get("attrs") or {})}
        args["host_ms"] = c["host_ns"] / 1e6
        if c.get("dev_ns") is not None:
            args["dev_ms"] = c["dev_ns"] / 1e6
        if c.get("ab"):
            args["ab"] = c["ab"]
        if c.get("timed") is False:
            args["timed"] = False
        name = f"cycle {c['cycle']}"
        kind = (c.get("attrs") or {}).get("kind")
        if kind is not None:
            name += f" {kind}"
        if c["cycle"] in stall_set:
            name += " STALL"
            args["stall"] = True
            events.append(
                {
                    "name": "stall",
                    "cat": "stall",
                    "ph": "i",
                    "s": "t",
                    "pid": pid,
                    "tid": cpu_tid,
                    "ts": (wall(c["t0"]) - origin) / 1000.0,
                    "args": {
                        "cycle": c["cycle"],
                        "host_ms": c["host_ns"] / 1e6,
                        "batch_size": (c.get("attrs") or {}).get("batch_size"),
                    },
                }
            )
        events.append(_span(name, "cycle", pid, cpu_tid, wall(c["t0"]), c["host_ns"], origin, args))
        if c["cycle"] in gpu_start:
            events.append(
                _span(name, "cycle", pid, gpu_tid, gpu_start[c["cycle"]], c["dev_ns"], origin, args)
            )
    return events


def _phase_events(
    proc: ProcessTiming, wall, origin: float, lanes: tuple[int, int, int], gpu_start: dict
) -> list[dict]:
    """A span per phase call on the CPU lane, and on the GPU lane at its device offset in its
    cycle (outside a cycle: at its host start)."""
    pid, cpu_tid, gpu_tid = lanes
    events: list[dict] = []
    for r in proc.phases:
        args = {
            "cycle": r.get("cycle"),
            "depth": r.get("depth"),
            "parent": r.get("parent"),
            "graph": r.get("graph", False),
            "captured": r.get("captured", False),
            **(r.get("attrs") or {}),
        }
        if r.get("host_ns") is not None:
            args["host_ms"] = r["host_ns"] / 1e6
        if r.get("dev_ns") is not None:
            args["dev_ms"] = r["dev_ns"] / 1e6
        if r.get("t0") is not None:
            events.append(_span(r["name"], "phase", pid, cpu_tid, wall(r["t0"]), r["host_ns"], origin, args))
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
        events.append(_span(r["name"], "phase", pid, gpu_tid, start, r["dev_ns"], origin, args))
    return events
