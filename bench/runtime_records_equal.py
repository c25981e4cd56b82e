"""The timing runtime's records, byte for byte: the working tree's against a base commit's.

Each configuration (a mode and its options) runs one deterministic scenario through the
runtime of the base commit (`git show REV:patchkit/timing/phase_timer.py`) and through the
working tree's, each in a fresh interpreter with the runtime alone on sys.path, and the two
outputs are compared byte for byte. The clock is replaced so that the records are equal
whenever the runtime does the same work: the runtime's perf_counter_ns (its module global
`_perf`) is the tests' fake clock (tests/support/clock/fake_clock.py) from a fixed start,
advancing 137 ns per read and by the scenario's "work", a stand-in torch (CUDA events that complete LAG ns of that clock after they were
recorded, NVTX, a capture flag, events with external=, torch.distributed, the profiler's
record_function ops) takes its time from the same counter, and the idle flusher never wakes
(PATCHKIT_TIMER_IDLE_FLUSH_MS very long). Only what differs between any two processes is
masked: the header's pid, wall_t0_ns and host, and the pid in the file name. The output
compared is each file's bytes plus the NVTX and record_function calls the runtime made and
what the module functions return.

Usage: python bench/runtime_records_equal.py [--base main] [--only NAME] [--runtime FILE]
Exit status 1 when any configuration differs (or fails to run), else 0.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = ROOT / "patchkit" / "timing" / "phase_timer.py"
CLOCK_DIR = ROOT / "tests" / "support" / "clock"  # fake_clock.py, alone in its folder
sys.path.insert(0, str(ROOT / "bench"))
from timer_host_cost import runtime_text  # noqa: E402  (the base's runtime: a revision or a file)

STAND_IN = r"""
import sys, types, inspect
import fake_clock  # (tests/support/clock: the tests' fake clock, here from a fixed start)
fake_clock.NOW[0], fake_clock.STEP_NS = 1_000_000_000, 137
CLOCK, perf, work = fake_clock.NOW, fake_clock._read, fake_clock.work
LAG = 40_000
CAPTURING = [False]
CALLS = []
DIST = [None]

class Event:
    def __new__(cls, device=None, enable_timing=False, external=False, **kwargs):
        self = object.__new__(cls)
        self.t = None
        self.external = external
        return self
    def record(self, stream=None):
        self.t = CLOCK[0]
    def query(self):
        return self.t is None or CLOCK[0] >= self.t + LAG
    def synchronize(self):
        if not self.query():
            CLOCK[0] = self.t + LAG
    def elapsed_time(self, other):
        if not (self.query() and other.query()):
            raise RuntimeError("CUDA error: device not ready")
        return (other.t - self.t) / 1e6

class Tensor:
    is_cuda = True
    def __init__(self, values):
        self.values = values
    def detach(self):
        return self
    def tolist(self):
        return list(self.values)
    def __repr__(self):
        return "Tensor(%r)" % (self.values,)
    def to(self, device, non_blocking=False):
        return CpuTensor(self.values)

class CpuTensor:
    is_cuda = False
    def __init__(self, values):
        self.values = values
    def tolist(self):
        return list(self.values)

class _Dist:
    @staticmethod
    def is_available():
        return True
    @staticmethod
    def is_initialized():
        return DIST[0] is not None
    @staticmethod
    def get_rank():
        return DIST[0][0]
    @staticmethod
    def get_world_size():
        return DIST[0][1]

torch = types.ModuleType("torch")
torch.__version__ = "stand-in"
torch.Event = Event
torch.distributed = _Dist
torch.cuda = types.SimpleNamespace(
    Event=Event,
    is_available=lambda: True,
    is_initialized=lambda: True,
    synchronize=lambda: work(5_000),
    get_device_name=lambda: "stand-in GPU",
    is_current_stream_capturing=lambda: CAPTURING[0],
    nvtx=types.SimpleNamespace(
        range_push=lambda name: CALLS.append(("push", name)),
        range_pop=lambda: CALLS.append(("pop",)),
    ),
)
PROFILING = types.ModuleType("torch.autograd.profiler")
PROFILING._is_profiler_enabled = False

def _rf_enter(name, args):
    CALLS.append(("rf", name))
    return name

def _rf_exit(handle):
    CALLS.append(("rf-exit", handle))

torch.ops = types.SimpleNamespace(
    profiler=types.SimpleNamespace(_record_function_enter_new=_rf_enter, _record_function_exit=_rf_exit)
)
if WITH_TORCH:
    sys.modules["torch"] = torch
if WITH_PROFILER:
    sys.modules["torch.autograd.profiler"] = PROFILING
"""

SCENARIO = r"""
import phase_timer as _pt
_pt._perf = perf
RESULTS = []
RESULTS.append(("configure", _pt.configure(**CONFIGURE)))
# outside cycles: warm-up phases, notes, an unmatched end, a phase with attrs
for w in range(3):
    _pt.begin("warmup", step=w); work(3_000); _pt.begin("warm_inner"); _pt.end("warm_inner"); _pt.end("warmup")
_pt.note(loaded=True, sizes=[1, 2, 3])
_pt.end("never_begun")
_pt.cycle_end(stray=1)
# a capture outside cycles (graph steps where on, else skipped)
CAPTURING[0] = True
_pt.begin("draft_step", graph_key="g1"); _pt.begin("draft_inner"); _pt.end("draft_inner"); _pt.end("draft_step")
_pt.begin("verify_step"); _pt.end("verify_step")
_pt.end("not_open")
_pt.cycle_begin(kind="captured")
_pt.note(skipped=1)
CAPTURING[0] = False
_pt.begin("replay", graph=True, graph_key="g1"); work(20_000); _pt.end("replay")
_pt.flush()
work(100_000)
_pt.flush()
KINDS = ("decode", "decode", "prefill", "decode", "extend")
for i in range(CYCLES):
    kind = KINDS[i % len(KINDS)]
    _pt.cycle_begin(kind=kind, batch_size=8 + i % 3)
    _pt.begin("draft")
    work(2_000 + 300 * (i % 7))
    _pt.begin("draft_forward", graph=(i % 2 == 0), graph_key="g1")
    work(5_000)
    _pt.end("draft_forward")
    _pt.end("draft")
    _pt.note(accepted=i % 4, ratio=0.5 if i % 5 else None, tag="t%d" % (i % 3))
    _pt.begin("verify", size=i % 3)
    work(9_000 + 1_000 * (i % 5))
    _pt.begin("a%b")  # a name with a percent sign
    _pt.end("a%b")
    _pt.end("verify")
    _pt.begin("sample"); _pt.end("sample")
    if i % 11 == 3:
        _pt.end("no_such_phase")  # unmatched inside a cycle
    if i % 13 == 5:
        _pt.begin("outer"); _pt.begin("inner"); _pt.end("outer")  # closes inner too
    if i % 17 == 7:
        _pt.begin("left_open")  # abandoned by cycle_end
    if i % 19 == 9:
        _pt.cycle_begin(kind="abandoning")  # the open cycle is abandoned
        _pt.begin("x"); _pt.end("x")
    if i % 23 == 11:
        _pt.cycle_end(tokens=Tensor([i, i + 1]), steps=[1, 2], extra={"k": i})
    elif i % 29 == 13:
        _pt.cycle_end(tokens=Tensor([i]))
    else:
        _pt.cycle_end(tokens=11 + i % 2, name="n%d" % (i % 2))
    work(4_000 + 2_000 * (i % 3))
    if i == PROFILE_FROM:
        PROFILING._is_profiler_enabled = True
    if i == PROFILE_TO:
        PROFILING._is_profiler_enabled = False
    if i == RANK_AT:
        DIST[0] = (3, 8)
    if i % 37 == 20:
        _pt.flush()
        work(300_000)
# after the cycles: phases outside again, an idle gap, a cycle left open at exit
_pt.begin("tail"); work(1_000); _pt.end("tail")
_pt.note(done=True)
_pt.cycle_begin(kind="last")
_pt.begin("open_at_exit")
RESULTS.append(("mode", _pt.current_mode()))
_pt.shutdown()
RESULTS.append(("after", _pt.current_mode(), _pt.output_path() is None))
import json
print(json.dumps({"calls": CALLS, "results": RESULTS}))
"""

BASE_ENV = {
    "PATCHKIT_TIMER_IDLE_FLUSH_MS": "100000000",  # the idle flusher never wakes
    "PATCHKIT_TIMER_SEED": "11",
}

# name -> (configure() keyword arguments, environment, scenario settings)
CONFIGS: dict[str, tuple[dict, dict, dict]] = {}


def _add(name, configure, env=None, **settings):
    CONFIGS[name] = (configure, env or {}, settings)


_add("off", {"mode": "off"})
_add("off-env", {}, {"PATCHKIT_TIMER": "off"})
_add("auto-no-torch", {"sample": 1}, with_torch=False)
_add("auto-torch", {"sample": 1})
for _mode in ("host", "sync", "events"):
    _add(f"{_mode}", {"mode": _mode, "sample": 1})
    _add(f"{_mode}-nvtx", {"mode": _mode, "sample": 1, "nvtx": True})
    _add(f"{_mode}-sample4", {"mode": _mode, "sample": 4})
    _add(f"{_mode}-sample4-nvtx", {"mode": _mode, "sample": 4, "nvtx": True})
    _add(f"{_mode}-ab3-off", {"mode": _mode, "sample": 1, "ab": 3})
    _add(f"{_mode}-ab4-bare", {"mode": _mode, "sample": 1, "ab": 4}, {"PATCHKIT_TIMER_AB_B": "bare"})
    _add(f"{_mode}-ab3-sample4", {"mode": _mode, "sample": 4, "ab": 3}, {"PATCHKIT_TIMER_AB_B": "sample"})
    _add(f"{_mode}-ab3-sample4-nvtx", {"mode": _mode, "sample": 4, "ab": 3, "nvtx": True})
    _add(f"{_mode}-budget", {"mode": _mode}, cycles=400)
    _add(f"{_mode}-budget-0.2", {"mode": _mode, "budget": 0.2}, cycles=400)
    _add(f"{_mode}-budget-0", {"mode": _mode, "budget": 0})
    _add(f"{_mode}-budget-ab", {"mode": _mode, "ab": 5}, cycles=300)
    _add(f"{_mode}-profiler", {"mode": _mode, "sample": 1}, profiler=True)
    _add(f"{_mode}-profiler-sample3", {"mode": _mode, "sample": 3}, profiler=True)
    _add(f"{_mode}-profiler-nvtx", {"mode": _mode, "sample": 1, "nvtx": True}, profiler=True)
    _add(f"{_mode}-rank", {"mode": _mode, "sample": 1}, rank_at=40)
_add("events-graph-steps", {"mode": "events", "sample": 1, "graph_steps": True})
_add("events-graph-steps-nvtx", {"mode": "events", "sample": 1, "graph_steps": True, "nvtx": True})
_add("events-graph-steps-sample4", {"mode": "events", "sample": 4, "graph_steps": True})
_add("events-cuda-event-api", {"mode": "events", "sample": 1, "event_api": "torch.cuda.Event"})
_add("events-share0", {"mode": "events", "sample": 1, "share_ns": 0})
_add("events-share-big", {"mode": "events", "sample": 1, "share_ns": 10_000})
_add("events-resolve1", {"mode": "events", "sample": 1}, {"PATCHKIT_TIMER_RESOLVE_BATCH": "1"})
_add("events-resolve5-sample2", {"mode": "events", "sample": 2}, {"PATCHKIT_TIMER_RESOLVE_BATCH": "5"})
_add("host-batch4", {"mode": "host", "sample": 1, "batch": 4})
_add("host-sample4-batch8", {"mode": "host", "sample": 4, "batch": 8})
_add(
    "host-ab3-bare-batch4",
    {"mode": "host", "sample": 1, "ab": 3, "batch": 4},
    {"PATCHKIT_TIMER_AB_B": "bare"},
)
_add("host-flush0", {"mode": "host", "sample": 1, "flush_s": 0})
_add("host-rank-env", {"mode": "host", "sample": 1}, {"PATCHKIT_TIMER_RANK": "5"})
_add("events-env", {}, {"PATCHKIT_TIMER": "events", "PATCHKIT_TIMER_SAMPLE": "4", "PATCHKIT_TIMER_NVTX": "1"})
_add("sync-env-budget", {}, {"PATCHKIT_TIMER": "sync", "PATCHKIT_TIMER_BUDGET": "0.5%"}, cycles=300)


def script(runtime_dir: Path, configure: dict, settings: dict) -> str:
    head = "import sys\nsys.path.insert(0, %r)\nsys.path.append(%r)\n" % (str(runtime_dir), str(CLOCK_DIR))
    head += "WITH_TORCH = %r\nWITH_PROFILER = %r\n" % (
        settings.get("with_torch", True),
        settings.get("profiler", False),
    )
    body = SCENARIO
    for key, value in (
        ("CYCLES", settings.get("cycles", 120)),
        ("PROFILE_FROM", 30 if settings.get("profiler") else -1),
        ("PROFILE_TO", 70 if settings.get("profiler") else -1),
        ("RANK_AT", settings.get("rank_at", -1)),
    ):
        body = body.replace(key, str(value))
    return head + STAND_IN + body.replace("**CONFIGURE", "**%r" % (configure,))


def run(runtime_dir: Path, out_dir: Path, configure: dict, env: dict, settings: dict) -> bytes:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHKIT_TIMER")}
    for var in ("RANK", "LOCAL_RANK", "TP_RANK", "SGLANG_TP_RANK", "WORLD_SIZE"):
        full_env.pop(var, None)
    full_env.update(BASE_ENV, PATCHKIT_TIMER_DIR=str(out_dir), **env)
    res = subprocess.run(
        [sys.executable, "-c", script(runtime_dir, configure, settings)],
        env=full_env,
        capture_output=True,
        timeout=300,
        cwd=str(runtime_dir),
    )
    parts = [b"rc %d\n" % res.returncode, b"stdout " + res.stdout, b"stderr " + res.stderr]
    for path in sorted(out_dir.glob("*.jsonl")):
        name = path.name.split(".pid")[0]
        parts.append(b"file " + name.encode() + b"\n")
        for line in path.read_bytes().splitlines(keepends=True):
            if line.startswith(b'{"kind":"header"'):
                rec = json.loads(line)
                rec["pid"] = rec["host"] = rec["clock"]["wall_t0_ns"] = "masked"
                rec["argv"] = "masked"
                line = json.dumps(rec).encode() + b"\n"
            parts.append(line)
    return b"".join(parts)


def first_difference(a: bytes, b: bytes) -> str:
    la, lb = a.splitlines(), b.splitlines()
    for i, (x, y) in enumerate(zip(la, lb)):
        if x != y:
            return f"line {i + 1}:\n    base: {x[:300]!r}\n    now:  {y[:300]!r}"
    return f"lengths differ: {len(la)} lines (base) vs {len(lb)} (now)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="main", help="git revision (or file) of the runtime to compare with")
    ap.add_argument("--runtime", default=str(RUNTIME), help="the runtime file to check")
    ap.add_argument("--only", action="append", help="run only these configurations")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="records-equal-"))
    base_dir, now_dir = work / "base", work / "now"
    base_dir.mkdir()
    now_dir.mkdir()
    (base_dir / "phase_timer.py").write_text(runtime_text(args.base), encoding="utf-8")
    (now_dir / "phase_timer.py").write_bytes(Path(args.runtime).read_bytes())
    names = args.only or list(CONFIGS)
    bad = 0
    for name in names:
        configure, env, settings = CONFIGS[name]
        outs = []
        for label, runtime_dir in (("base", base_dir), ("now", now_dir)):
            out = work / "out" / name / label
            out.mkdir(parents=True)
            outs.append(run(runtime_dir, out, configure, env, settings))
        base, now = outs
        ok = base == now and base.startswith(b"rc 0\n")
        records = sum(1 for line in base.splitlines() if line.startswith(b'{"kind"'))
        verdict = "equal" if ok else "DIFFERENT"
        print(f"{name:32} {verdict:9} {records:5d} records, {len(base):7d} bytes")
        if not ok:
            bad += 1
            print("  " + first_difference(base, now))
    print(f"{len(names) - bad} of {len(names)} configurations equal (base {args.base})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
