"""The timing runtime (patchkit/timing/phase_timer.py), run as the target packages run it.

Each scenario runs in a fresh interpreter with the runtime copied alone into a temporary
folder (as a series inserts it), so that import-time environment handling, atexit and fork
behave exactly as in a host program. CUDA scenarios run only where CUDA exists (the H200
bench machine); here they are skipped.
"""

import itertools
import json
import os
import signal
import subprocess
import sys

import pytest

from patchkit.timing import RUNTIME_PATH, runtime_bytes, runtime_source
from support.requires import has_cuda
from support.timing_scripts import (
    fake_torch,  # noqa: F401  (a pytest fixture)
    needs_torch,
    read_records,
    run_script,
    with_fake_torch,
)

# CUDA is decided when such a test is about to run (tests/conftest.py, the `cuda` marker), not
# while every test process collects the suite: importing torch to ask for it takes seconds.
needs_cuda = pytest.mark.cuda


WORKLOAD = """
import phase_timer as _pt
for i in range(CYCLES):
    _pt.cycle_begin(batch_size=4)
    _pt.begin("draft")
    _pt.begin("draft_forward")
    work(2_000_000)
    _pt.end("draft_forward")
    _pt.end("draft")
    _pt.begin("verify", graph=True)
    work(1_000_000)
    _pt.end("verify")
    _pt.note(accepted=3)
    _pt.cycle_end(tokens=7)
"""


def workload(cycles):
    """CYCLES cycles of draft (holding draft_forward, 2 ms) and verify (1 ms) on the fake clock:
    for run_script(clock=True)."""
    return WORKLOAD.replace("CYCLES", str(cycles))


def test_source_of_truth_is_the_file():
    # what the shipped series add to the target is this file, line for line (the series as the
    # engine reads it: its runtime patch rendered from this file; tests/engine/test_runtime_patch.py)
    from patchkit.engine.diffparse import parse_patch
    from patchkit.engine.series import read_series

    series = read_series(str(RUNTIME_PATH.parents[2] / "patches" / "sglang-v0.5.9"))
    name, data = series.patches[0]
    fd = parse_patch(name, data).files[0]
    assert fd.kind == "create" and fd.path.endswith("/phase_timer.py")
    added = b"".join(ln.text + b"\n" for h in fd.hunks for ln in h.lines if ln.tag == "+")
    assert added.decode("utf-8") == runtime_source()
    assert runtime_bytes().decode("utf-8") == runtime_source()
    compile(runtime_source(), "phase_timer.py", "exec")


def test_import_is_stdlib_only(runtime_dir, tmp_path):
    res = run_script(
        runtime_dir,
        """
        import phase_timer as _pt
        heavy = [m for m in ("torch", "numpy", "matplotlib") if m in sys.modules]
        _pt.cycle_begin(); _pt.begin("x"); _pt.end("x"); _pt.cycle_end()
        heavy += [m for m in ("torch", "numpy") if m in sys.modules]
        print("HEAVY", heavy, _pt.current_mode())
    """,
        out_dir=tmp_path / "out",
    )
    assert res.returncode == 0, res.stderr
    assert "HEAVY [] host" in res.stdout


def test_host_mode_records_nested_phases_and_cycle_attrs(runtime_dir, tmp_path):
    """On the fake clock: each phase holds exactly its work plus a few clock reads, and the
    top-level phases cover the cycle but for those reads, on a loaded machine as on an idle one."""
    out = tmp_path / "out"
    body = workload(5) + "import fake_clock, os\nprint(fake_clock.STEP_NS, os.getpid())\n"
    res = run_script(runtime_dir, body, out_dir=out, clock=True)
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""
    step, pid = map(int, res.stdout.split()[-2:])
    files = read_records(out)
    assert list(files) == ["phase-timing.rank0.pid%d.jsonl" % pid]
    recs = files["phase-timing.rank0.pid%d.jsonl" % pid]
    header, stats = recs[0], recs[-1]
    assert header["kind"] == "header" and header["schema"] == "patchkit.timing/1"
    assert header["mode"] == "host" and header["requested_mode"] is None
    assert header["pid"] == pid and header["rank"] == 0 and header["rank_source"] == "default"
    assert header["clock"]["host"] == "time.perf_counter_ns"
    assert stats["kind"] == "stats" and stats["records"] == len(recs) - 2
    cycles = [r for r in recs if r["kind"] == "cycle"]
    phases = [r for r in recs if r["kind"] == "phase"]
    assert [c["cycle"] for c in cycles] == list(range(5))
    assert all(c["attrs"] == {"batch_size": 4, "accepted": 3, "tokens": 7} for c in cycles)
    assert len(phases) == 15
    inner = [p for p in phases if p["name"] == "draft_forward"]
    assert all(p["depth"] == 1 and p["parent"] == "draft" for p in inner)
    reads = 8 * step  # a phase's own clock reads: a handful, whatever the machine is doing
    for p in phases:
        work = {"draft_forward": 2_000_000, "draft": 2_000_000, "verify": 1_000_000}[p["name"]]
        assert work < p["host_ns"] <= work + reads, p
        assert p["host_ns"] == p["t1"] - p["t0"]
    for c in cycles:
        mine = [p for p in phases if p["cycle"] == c["cycle"]]
        assert {p["name"] for p in mine} == {"draft", "draft_forward", "verify"}
        assert all(c["t0"] <= p["t0"] <= p["t1"] <= c["t1"] for p in mine)
        top = sum(p["host_ns"] for p in mine if p["depth"] == 0)
        # the top-level phases cover the whole cycle but for the timer's own reads (every
        # cycle: a real clock gave a median of 90 % or more, and a CI run drew 70 % once)
        assert 3_000_000 < top <= c["host_ns"] <= top + 2 * reads, (top, c)
    verify = [p for p in phases if p["name"] == "verify"]
    assert all(p["graph"] is True and p["dev_ns"] is None for p in verify)


def test_rank_from_environment_and_override(runtime_dir, tmp_path):
    out = tmp_path / "out"
    assert run_script(runtime_dir, workload(1), env={"RANK": "3"}, out_dir=out, clock=True).returncode == 0
    assert (
        run_script(
            runtime_dir,
            workload(1),
            env={"LOCAL_RANK": "2", "PATCHKIT_TIMER_RANK": "5"},
            out_dir=out,
            clock=True,
        ).returncode
        == 0
    )
    names = sorted(read_records(out))
    assert len(names) == 2
    assert names[0].startswith("phase-timing.rank3.pid")
    assert names[1].startswith("phase-timing.rank5.pid")
    header = read_records(out)[names[0]][0]
    assert header["rank"] == 3 and header["rank_source"] == "env:RANK"


def test_off_mode_is_a_cheap_noop(runtime_dir, tmp_path):
    out = tmp_path / "out"
    res = run_script(
        runtime_dir,
        workload(3)
        + """
import timeit
n = 200000
t = min(timeit.repeat("_pt.begin('draft'); _pt.end('draft')", globals=globals(), number=n, repeat=3))
print("NS_PER_CALL", t / (2 * n) * 1e9)
print("NOOP", _pt.begin is _pt._noop and _pt.cycle_end is _pt._noop, _pt.current_mode())
""",
        env={"PATCHKIT_TIMER": "off"},
        out_dir=out,
        clock=True,
    )
    assert res.returncode == 0, res.stderr
    assert "NOOP True off" in res.stdout
    ns = float(res.stdout.split("NS_PER_CALL")[1].split()[0])
    assert ns < 1000, "off-mode call cost %.0f ns" % ns
    assert not out.exists()


def test_every_cycle_is_written_when_it_ends(runtime_dir, tmp_path):
    """Each cycle_end writes its cycle (one write), whatever the batch size says."""
    out = tmp_path / "out"
    res = run_script(
        runtime_dir,
        workload(1)
        + """
import glob, os
_pt.configure(batch=8, flush_s=1e9)
sizes = []
for i in range(10):
    _pt.cycle_begin(); _pt.begin("a"); _pt.end("a"); _pt.cycle_end()
    files = glob.glob(os.path.join(os.environ["PATCHKIT_TIMER_DIR"], "*.jsonl"))
    sizes.append(sum(1 for f in files for _ in open(f)))
print("SIZES", sizes)
print("WRITES", _pt._timer.counts["writes"])
""",
        out_dir=out,
        clock=True,
    )
    assert res.returncode == 0, res.stderr
    sizes = json.loads(res.stdout.split("SIZES")[1].splitlines()[0])
    # the first configuration's file (header, 3 phases, cycle, stats) was written at
    # configure(); the second file starts with its header and then grows by one phase and
    # one cycle per cycle
    assert sizes[0] == 6 + 3
    assert [b - a for a, b in itertools.pairwise(sizes)] == [2] * 9
    assert int(res.stdout.split("WRITES")[1]) == 10
    recs = [r for rs in read_records(out).values() for r in rs]
    assert sum(r["kind"] == "cycle" for r in recs) == 11
    assert sum(r["kind"] == "stats" for r in recs) == 2


def test_everything_is_flushed_at_exit(runtime_dir, tmp_path):
    out = tmp_path / "out"
    res = run_script(
        runtime_dir,
        workload(40),
        env={"PATCHKIT_TIMER_BATCH": "100000", "PATCHKIT_TIMER_FLUSH_S": "1000"},
        out_dir=out,
        clock=True,
    )
    assert res.returncode == 0, res.stderr
    (recs,) = read_records(out).values()
    assert sum(r["kind"] == "cycle" for r in recs) == 40
    assert sum(r["kind"] == "phase" for r in recs) == 120
    assert recs[-1]["kind"] == "stats"


def test_write_failure_warns_once_and_never_raises(runtime_dir, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the directory should be")
    res = run_script(
        runtime_dir,
        """
import phase_timer as _pt
_pt.configure(batch=2)
for i in range(20):
    _pt.cycle_begin(); _pt.begin("a"); _pt.end("a"); _pt.cycle_end()
print("SURVIVED", _pt.current_mode(), _pt.begin is _pt._noop)
""",
        out_dir=blocker / "sub",
    )
    assert res.returncode == 0, res.stderr
    assert "SURVIVED off True" in res.stdout
    warnings = [ln for ln in res.stderr.splitlines() if ln.startswith("patchkit phase_timer:")]
    assert len(warnings) == 1, res.stderr
    assert "timing is off" in warnings[0] and "not-a-dir" in warnings[0]
    assert "Traceback" not in res.stderr


def test_unbalanced_calls_are_counted_not_raised(runtime_dir, tmp_path):
    out = tmp_path / "out"
    res = run_script(
        runtime_dir,
        """
import phase_timer as _pt
_pt.end("never-begun")
_pt.cycle_end()
_pt.cycle_begin()
_pt.begin("outer"); _pt.begin("lost"); _pt.end("outer")
_pt.begin("left-open")
_pt.cycle_begin()          # the previous cycle never ended
_pt.begin("ok"); _pt.end("ok")
_pt.cycle_end()
""",
        out_dir=out,
    )
    assert res.returncode == 0, res.stderr
    (recs,) = read_records(out).values()
    stats = recs[-1]
    assert stats["unmatched_end"] == 2
    assert stats["abandoned"] == 3  # "lost", "left-open", and cycle 0
    phases = [r for r in recs if r["kind"] == "phase"]
    assert [(p["name"], p["cycle"], p["depth"]) for p in phases] == [("outer", 0, 0), ("ok", 1, 0)]
    assert [r["cycle"] for r in recs if r["kind"] == "cycle"] == [1]


def test_forked_child_writes_its_own_file(runtime_dir, tmp_path):
    out = tmp_path / "out"
    res = run_script(
        runtime_dir,
        workload(2)
        + """
import os
pid = os.fork()
if pid == 0:
    _pt.cycle_begin(batch_size=1); _pt.begin("child"); _pt.end("child"); _pt.cycle_end()
    _pt.shutdown()
    os._exit(0)
os.waitpid(pid, 0)
_pt.cycle_begin(); _pt.begin("parent"); _pt.end("parent"); _pt.cycle_end()
""",
        out_dir=out,
        clock=True,
    )
    assert res.returncode == 0, res.stderr
    files = read_records(out)
    assert len(files) == 2
    by_names = {}
    for recs in files.values():
        names = {r["name"] for r in recs if r["kind"] == "phase"}
        by_names[frozenset(names)] = recs
    child = by_names[frozenset({"child"})]
    parent = by_names[frozenset({"draft", "draft_forward", "verify", "parent"})]
    assert [r["cycle"] for r in child if r["kind"] == "cycle"] == [0]
    assert [r["cycle"] for r in parent if r["kind"] == "cycle"] == [0, 1, 2]


@needs_torch
@pytest.mark.slow  # a fresh process importing torch (2-5 s)
def test_cpu_torch_tensor_attrs_and_cuda_modes_fall_back(runtime_dir, tmp_path):
    out = tmp_path / "out"
    res = run_script(
        runtime_dir,
        """
import torch
import phase_timer as _pt
_pt.cycle_begin(batch_size=torch.tensor(2))
_pt.begin("verify"); torch.ones(64, 64) @ torch.ones(64, 64); _pt.end("verify")
_pt.cycle_end(accepted=torch.tensor([1, 3]))
print("MODE", _pt.current_mode())
""",
        env={"PATCHKIT_TIMER": "sync"},
        out_dir=out,
    )
    assert res.returncode == 0, res.stderr
    if not has_cuda():
        assert "MODE host" in res.stdout
        assert "PATCHKIT_TIMER=sync needs CUDA" in res.stderr
    (recs,) = read_records(out).values()
    assert recs[0]["requested_mode"] == "sync" and recs[0]["torch"]
    (cycle,) = [r for r in recs if r["kind"] == "cycle"]
    assert cycle["attrs"] == {"batch_size": 2, "accepted": [1, 3]}


@needs_torch
@pytest.mark.slow  # a fresh process importing torch (2-5 s)
def test_capture_probe_is_safe_without_cuda(runtime_dir, tmp_path):
    """CPU torch raises from is_current_stream_capturing(); the runtime must not."""
    out = tmp_path / "out"
    res = run_script(runtime_dir, "import torch\n" + workload(2), out_dir=out, clock=True)
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""
    (recs,) = read_records(out).values()
    assert sum(r["kind"] == "cycle" for r in recs) == 2


# ---- CUDA (run on the GPU machine: python -m pytest tests/timing/test_timing_runtime.py) ----------


@needs_cuda
def test_events_mode_device_times(runtime_dir, tmp_path):
    out = tmp_path / "out"
    res = run_script(
        runtime_dir,
        """
import torch
a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize()
import phase_timer as _pt
for i in range(20):
    _pt.cycle_begin(batch_size=8)
    _pt.begin("outer")
    _pt.begin("mm")
    for _ in range(8):
        b = a @ a
    _pt.end("mm")
    _pt.end("outer")
    _pt.cycle_end(accepted=torch.tensor([3], device="cuda"))
print("MODE", _pt.current_mode())
""",
        out_dir=out,
    )
    assert res.returncode == 0, res.stderr
    assert "MODE events" in res.stdout
    (recs,) = read_records(out).values()
    assert recs[0]["mode"] == "events" and recs[0]["cuda_device"]
    assert recs[0]["event_api"] in ("torch.Event", "torch.cuda.Event")
    assert [r["cycle"] for r in recs if r["kind"] == "dev"] == list(range(20))
    from patchkit.report import load_timing_dir

    (proc,) = load_timing_dir(out)  # device times and CUDA-tensor attrs merged in
    cycles = proc.cycles
    mm = [r for r in proc.phases if r["name"] == "mm"]
    assert len(cycles) == 20 and len(mm) == 20
    assert all(c["attrs"]["accepted"] == 3 for c in cycles)
    assert all(c["dev_gap_ns"] > 0 for c in cycles[1:])
    for p in mm:
        assert p["dev_ns"] > 100_000 and p["dev_off_ns"] >= 0


@needs_cuda
def test_nothing_recorded_while_capturing(runtime_dir, tmp_path):
    out = tmp_path / "out"
    res = run_script(
        runtime_dir,
        """
import torch
import phase_timer as _pt
x = torch.randn(1024, 1024, device="cuda")
_pt.configure(mode="events")
g = torch.cuda.CUDAGraph()
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    y = x @ x
torch.cuda.current_stream().wait_stream(s)
with torch.cuda.graph(g):
    _pt.cycle_begin(); _pt.begin("inside"); y = x @ x; _pt.end("inside"); _pt.cycle_end()
_pt.cycle_begin(); _pt.begin("replay", graph=True); g.replay(); _pt.end("replay"); _pt.cycle_end()
""",
        out_dir=out,
    )
    assert res.returncode == 0, res.stderr
    (recs,) = read_records(out).values()
    names = [r["name"] for r in recs if r["kind"] == "phase"]
    assert names == ["replay"]
    assert recs[-1]["skipped_capturing"] == 2
    from patchkit.report import load_timing_dir

    (proc,) = load_timing_dir(out)
    (replay,) = proc.phases
    assert replay["graph"] is True and replay["dev_ns"] > 0


# ---- durability, A/B, NVTX; the events mode on a CPU through a stand-in torch ----------

LOOP = """
import os, time
import phase_timer as _pt
for w in range(3):                      # warm-up, outside any cycle
    _pt.begin("warmup"); _pt.end("warmup")
time.sleep(0.005)                       # the (stand-in) GPU has caught up: flush writes them
_pt.flush()
for i in range(4000):
    _pt.cycle_begin(kind="decode", batch_size=2)
    _pt.begin("draft")
    _pt.begin("draft_step"); _pt.end("draft_step")
    _pt.end("draft")
    _pt.begin("verify"); time.sleep(0.0003); _pt.end("verify")
    _pt.cycle_end(accepted=i % 3)
    os.write(1, b"DONE %d\\n" % i)
"""


def _run_until(runtime_dir, out, body, cycles_before, sig, env):
    """Start the loop, send `sig` once `cycles_before` cycles have returned from cycle_end;
    returns (return code, last cycle index the loop reported done, stderr)."""
    script = "import sys\nsys.path.insert(0, %r)\n" % str(runtime_dir) + body
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHKIT_TIMER")}
    full_env.update(env, PATCHKIT_TIMER_DIR=str(out))
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        env=full_env,
        cwd=str(runtime_dir),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    done = -1
    try:
        while done < cycles_before - 1:
            line = proc.stdout.readline()
            assert line, "loop ended early: %s" % proc.stderr.read().decode()
            done = int(line.split()[1])
        proc.send_signal(sig)
        proc.wait(timeout=60)
        # read through the same buffered reader: lines it already holds count too
        rest, err = proc.stdout.read(), proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for line in rest.decode().splitlines():
        done = int(line.split()[1])
    return proc.returncode, done, err.decode()


@pytest.mark.parametrize("timer", ["host", "events"])
@pytest.mark.parametrize(
    "sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT], ids=["SIGKILL", "SIGTERM", "SIGINT"]
)
def test_completed_cycles_survive_a_kill(runtime_dir, fake_torch, tmp_path, sig, timer):  # noqa: F811
    """Killed at spread instants: every cycle whose cycle_end returned is on disk; in
    events mode only the last few lack device times; SIGINT's KeyboardInterrupt reaches
    the program (it is not swallowed) and the exit hook then writes everything."""
    from patchkit.report import load_timing_dir, summarize

    body = LOOP if timer == "host" else with_fake_torch(fake_torch, LOOP, LAG_NS=1_500_000)
    for n, instant in enumerate((1, 9, 57)):
        out = tmp_path / ("out%d" % n)
        rc, done, err = _run_until(runtime_dir, out, body, instant, sig, {"PATCHKIT_TIMER": timer})
        assert rc == -sig, (rc, err)
        if sig == signal.SIGINT:
            assert "KeyboardInterrupt" in err
        (proc,) = load_timing_dir(out)
        assert proc.mode == timer
        indices = [c["cycle"] for c in proc.cycles]
        assert indices == list(range(len(indices)))
        assert len(indices) >= done + 1 >= instant
        assert len(indices) <= done + 2  # at most the one running when the signal came
        phases = [p for p in proc.phases if p["cycle"] is not None and p["cycle"] <= done]
        assert len(phases) == 3 * (done + 1)
        assert [p["name"] for p in proc.phases if p["cycle"] is None] == ["warmup"] * 3
        lacking = [c["cycle"] for c in proc.cycles if c["dev_ns"] is None]
        if timer == "host":
            assert lacking == indices
        elif sig == signal.SIGINT:
            assert lacking == [] and proc.stats is not None
            assert proc.stats["dropped_pending"] == 0
        else:
            assert proc.stats is None
            # the GPU runs 1.5 ms behind, and every cycle timed reads device times 16 timed
            # cycles at a time (the default resolve batch): only the last cycles can still
            # lack device time, never their records
            assert lacking == indices[len(indices) - len(lacking) :]
            assert len(lacking) <= 6 + 15
            assert all(
                p["dev_ns"] is not None
                for p in proc.phases
                if p["cycle"] is not None and p["cycle"] not in lacking
            )
            summary = summarize([proc], str(out))
            assert summary.unresolved == len(lacking)
            assert summary.basis == ("device" if len(lacking) < len(indices) else "host")
            assert summary.cycle_kinds["decode"]["cycles"] == len(indices)


def test_events_mode_writes_host_first_then_device_times(runtime_dir, fake_torch, tmp_path):  # noqa: F811
    out = tmp_path / "out"
    res = run_script(
        runtime_dir,
        with_fake_torch(
            fake_torch,
            """
import glob, json, os, time
import phase_timer as _pt
print("MODE", _pt.configure(), _pt._timer.event_api)
seen = []
for i in range(6):
    _pt.cycle_begin(kind="decode")
    _pt.begin("verify"); work(2_000_000); _pt.end("verify")
    _pt.cycle_end()
    (path,) = glob.glob(os.path.join(os.environ["PATCHKIT_TIMER_DIR"], "*.jsonl"))
    recs = [json.loads(l) for l in open(path)]
    seen.append(([r["cycle"] for r in recs if r["kind"] == "cycle"],
                 [r["cycle"] for r in recs if r["kind"] == "dev"]))
print("SEEN", json.dumps(seen))
""",
            LAG_NS=3_000_000,
        ),
        env={"PATCHKIT_TIMER_RESOLVE_BATCH": "1"},  # read device times at every cycle_end
        out_dir=out,
        clock=True,
    )
    assert res.returncode == 0, res.stderr
    assert "MODE events torch.Event" in res.stdout
    seen = json.loads(res.stdout.split("SEEN")[1])
    for i, (cycles, devs) in enumerate(seen):
        assert cycles == list(range(i + 1))  # on disk as soon as cycle_end returned
        # the GPU is 3 ms behind and a cycle takes 2 ms (fake clock): cycle j's device times
        # are ready at the end of cycle j + 2, so that cycle_end writes them, and no earlier
        assert devs == list(range(max(0, i - 1))), (i, devs)
    (recs,) = read_records(out).values()
    assert [r["cycle"] for r in recs if r["kind"] == "dev"] == list(range(6))
    assert recs[-1]["writes"] == 7  # one per cycle, and the last at exit
    dev = [r for r in recs if r["kind"] == "dev"]
    for d in dev:  # the device times are the host's own times here: 2 ms and a few reads
        ((verify_ns, offset),) = d["phases"]
        assert 2_000_000 < verify_ns <= d["dev_ns"] < 2_001_000 and 0 <= offset < 1_000, d
    # from one cycle's start mark to the next: its 2 ms and the reads of one cycle's calls
    assert all(2_000_000 < d["dev_gap_ns"] < 2_010_000 for d in dev[1:]), dev


def test_ab_switch_alternates_blocks(runtime_dir, fake_torch, tmp_path):  # noqa: F811
    """PATCHKIT_TIMER_AB=4: cycles 0-3 timed, 4-7 off (host times only), 8-11 timed, ..."""
    from patchkit.report import build_report

    out = tmp_path / "out"
    res = run_script(
        runtime_dir,
        with_fake_torch(
            fake_torch,
            """
import phase_timer as _pt
for i in range(40):
    _pt.cycle_begin(kind="decode", batch_size=1)
    for name in ("a", "b", "c", "d"):
        _pt.begin(name); work(500_000); _pt.end(name)
    _pt.cycle_end()
print("RECORDS", torch.RECORDS[0])
""",
            LAG_NS=100_000,
            RECORD_SLEEP_NS=300_000,
        ),
        env={"PATCHKIT_TIMER_AB": "4"},
        out_dir=out,
        clock=True,
    )
    assert res.returncode == 0, res.stderr
    (recs,) = read_records(out).values()
    assert recs[0]["ab_cycles"] == 4
    cycles = [r for r in recs if r["kind"] == "cycle"]
    assert sorted(c["cycle"] for c in cycles) == list(range(40))
    for c in cycles:
        assert c["ab"] == ("events" if c["cycle"] // 4 % 2 == 0 else "off"), c
        assert c["attrs"]["kind"] == "decode"
    timed = {c["cycle"] for c in cycles if c["ab"] == "events"}
    phase_cycles = {r["cycle"] for r in recs if r["kind"] == "phase"}
    assert phase_cycles == timed
    summary = build_report(out, tmp_path / "report")
    ov = summary.overhead
    # 10 blocks: the timed blocks 2, 4, 6 and 8 have an off block on each side
    assert ov["ab_cycles"] == 4 and ov["pairs"] == 4 and ov["off_cycles"] == 20
    # on the fake clock the overhead is exactly the event records' cost (0.3 ms each, 20 timed
    # cycles) over the cycle's 2 ms of work, in every pair alike
    per_cycle = int(res.stdout.split("RECORDS")[1]) / 20
    assert per_cycle >= 5  # the cycle's two marks and the phases' (back-to-back ones shared)
    added_ms = ov["timed_period_ms"] - ov["off_period_ms"]
    assert added_ms == pytest.approx(0.3 * per_cycle, abs=0.005), ov
    assert ov["median_pct"] == pytest.approx(100 * added_ms / ov["off_period_ms"], abs=0.01)
    assert max(ov["pairs_pct"]) - min(ov["pairs_pct"]) < 0.01, ov
    assert summary.cycle["count"] == 20
    assert summary.phase("a")["count"] == 20
    assert (
        "timer overhead (PATCHKIT_TIMER_AB=4, 4 timed blocks against the off blocks on both sides"
        in (tmp_path / "report" / "table.txt").read_text()
    )


def test_ab_b_bare_off_blocks_record_cycle_starts_only(runtime_dir, fake_torch, tmp_path):  # noqa: F811
    """PATCHKIT_TIMER_AB_B=bare: the off blocks' cycle_end is the no-op and their cycles are
    written with their start and kind only (t1 = t0), every cycle still recorded; the sampled
    blocks are as usual; the report pairs them and says the off blocks were bare."""
    from patchkit.report import build_report

    out = tmp_path / "out"
    res = run_script(
        runtime_dir,
        with_fake_torch(
            fake_torch,
            """
import time
import phase_timer as _pt
for i in range(48):
    _pt.cycle_begin(kind="decode" if i % 12 else "prefill", batch_size=1)
    for name in ("a", "b"):
        _pt.begin(name); work(500_000); _pt.end(name)
    _pt.note(accepted=2)
    _pt.cycle_end(tokens=3)
print("END", _pt.cycle_end.__qualname__, _pt.cycle_begin.__qualname__)
""",
            LAG_NS=100_000,
            RECORD_SLEEP_NS=300_000,
        ),
        env={"PATCHKIT_TIMER_AB": "4", "PATCHKIT_TIMER_AB_B": "bare", "PATCHKIT_TIMER_SAMPLE": "2"},
        out_dir=out,
        clock=True,
    )
    assert res.returncode == 0, res.stderr
    assert "END _noop _BareBlocks.cycle_begin" in res.stdout  # the run ended inside an off block
    (recs,) = read_records(out).values()
    assert recs[0]["ab_b"] == "bare" and recs[0]["ab_cycles"] == 4
    cycles = {r["cycle"]: r for r in recs if r["kind"] == "cycle"}
    assert sorted(cycles) == list(range(48))
    for i, c in cycles.items():
        kind = "decode" if i % 12 else "prefill"
        if i // 4 % 2:
            assert c["ab"] == "off" and c["t1"] == c["t0"] and c["attrs"] == {"kind": kind}, c
        else:
            assert c["ab"] == "events" and c["t1"] > c["t0"] and c["attrs"]["kind"] == kind, c
    timed = {i for i, c in cycles.items() if c["ab"] == "events" and c.get("timed") is not False}
    assert 0 < len(timed) < 24  # the timed blocks are sampled
    assert {r["cycle"] for r in recs if r["kind"] == "phase"} == timed
    summary = build_report(out, tmp_path / "report")
    ov = summary.overhead
    assert ov["off_blocks"] == "bare" and ov["pairs"] == 5 and ov["off_cycles"] == 24, ov
    assert "off blocks bare" in (tmp_path / "report" / "table.txt").read_text()


def test_ab_b_bare_long_off_block_writes_in_batches(runtime_dir, fake_torch, tmp_path):  # noqa: F811
    """A bare off block longer than PATCHKIT_TIMER_BATCH does not hold its lines until it
    ends: they go out every PATCHKIT_TIMER_BATCH lines (memory stays bounded)."""
    out = tmp_path / "out"
    res = run_script(
        runtime_dir,
        with_fake_torch(
            fake_torch,
            """
import glob, os
import phase_timer as _pt
_pt.configure(mode="events", ab=1 << 20)
_pt._timer.cycle_no = (1 << 20) - 1  # the next cycle opens a (long) off block
for i in range(40):
    _pt.cycle_begin(kind="decode")
    _pt.cycle_end()
(path,) = glob.glob(os.path.join(os.environ["PATCHKIT_TIMER_DIR"], "*.jsonl"))
print("WAITING", len(_pt._timer.out), "WRITTEN", sum('"ab":"off"' in l for l in open(path)))
""",
            LAG_NS=0,
        ),
        env={
            "PATCHKIT_TIMER_AB_B": "bare",
            "PATCHKIT_TIMER_BATCH": "8",
            "PATCHKIT_TIMER_IDLE_FLUSH_MS": "60000",
        },
        out_dir=out,
    )
    assert res.returncode == 0, res.stderr
    assert "WAITING" in res.stdout, res.stdout
    waiting, written = int(res.stdout.split()[1]), int(res.stdout.split()[3])
    assert waiting < 8 and written >= 32, res.stdout


def test_nvtx_ranges_in_order_and_never_while_capturing(runtime_dir, fake_torch, tmp_path):  # noqa: F811
    body = """
import phase_timer as _pt
_pt.begin("warm"); _pt.end("warm")
torch.CAPTURING[0] = True
_pt.begin("captured"); _pt.end("captured")
_pt.cycle_begin(kind="decode"); _pt.cycle_end()
torch.CAPTURING[0] = False
_pt.cycle_begin(kind="decode")
_pt.begin("draft"); _pt.begin("step"); _pt.end("step"); _pt.end("draft")
_pt.begin("verify"); _pt.begin("lost")
_pt.cycle_end()
_pt.end("nothing open")
print("CALLS", torch.NVTX_CALLS)
"""
    res = run_script(
        runtime_dir,
        with_fake_torch(fake_torch, body),
        env={"PATCHKIT_TIMER_NVTX": "1", "PATCHKIT_TIMER": "host"},
        out_dir=tmp_path / "on",
    )
    assert res.returncode == 0, res.stderr
    calls = eval(res.stdout.split("CALLS")[1])
    assert calls == [
        ("push", "warm"),
        ("pop",),
        ("push", "cycle decode"),
        ("push", "draft"),
        ("push", "step"),
        ("pop",),
        ("pop",),
        ("push", "verify"),
        ("push", "lost"),
        ("pop",),
        ("pop",),
        ("pop",),
    ]
    (recs,) = read_records(tmp_path / "on").values()
    assert recs[0]["nvtx"] is True and recs[-1]["skipped_capturing"] == 2  # begin, cycle_begin
    res = run_script(
        runtime_dir,
        with_fake_torch(fake_torch, body),
        env={"PATCHKIT_TIMER": "host"},
        out_dir=tmp_path / "off",
    )
    assert res.returncode == 0, res.stderr
    assert "CALLS []" in res.stdout


def test_nvtx_without_torch_warns_and_times_anyway(runtime_dir, tmp_path):
    res = run_script(
        runtime_dir, workload(2), env={"PATCHKIT_TIMER_NVTX": "1"}, out_dir=tmp_path / "out", clock=True
    )
    assert res.returncode == 0, res.stderr
    assert "PATCHKIT_TIMER_NVTX=1 but torch is not imported" in res.stderr
    (recs,) = read_records(tmp_path / "out").values()
    assert sum(r["kind"] == "cycle" for r in recs) == 2


def test_phases_on_a_slower_stream_resolve_without_raising(runtime_dir, fake_torch, tmp_path):  # noqa: F811
    """SGLang's v2 worker: the cycle's start and end events on the scheduler's stream, its
    phases on a forward stream further behind. When the end event is done and a phase's is
    not, the runtime waits for a later cycle_end instead of reading times that raise (on the
    H200 each raised read cost more than a whole cycle of timer calls), and every cycle
    still gets its device times."""
    out = tmp_path / "out"
    body = """
import time
import phase_timer as _pt
for i in range(30):
    _pt.cycle_begin(kind="decode", batch_size=2)
    torch.STREAM_LAG[0] = 6_000_000          # the forward stream: 6 ms behind
    _pt.begin("draft"); work(200_000); _pt.end("draft")
    _pt.begin("verify"); work(200_000); _pt.end("verify")
    torch.STREAM_LAG[0] = None               # the scheduler's stream: 0.5 ms behind
    _pt.cycle_end()
    work(1_000_000)
print("ERRORS", torch.ELAPSED_ERRORS[0])
"""
    res = run_script(runtime_dir, with_fake_torch(fake_torch, body, LAG_NS=500_000), out_dir=out, clock=True)
    assert res.returncode == 0, res.stderr
    assert "ERRORS 0" in res.stdout, res.stdout
    (recs,) = read_records(out).values()
    devs = {r["cycle"]: r for r in recs if r["kind"] == "dev"}
    assert sorted(devs) == list(range(30))  # every cycle resolved (the last ones at exit)
    assert all(len(d["phases"]) == 2 and all(p[0] >= 0 for p in d["phases"]) for d in devs.values())
    assert recs[-1]["kind"] == "stats" and recs[-1]["dropped_pending"] == 0


def test_back_to_back_calls_share_one_event(runtime_dir, fake_torch, tmp_path):  # noqa: F811
    """end(a); begin(b) with nothing in between: one event marks both points; events go
    back to the pool once each, and the device times stay those of the marks."""
    body = """
import time
import phase_timer as _pt
_pt.configure(share_ns=SHARE)
for i in range(50):
    _pt.cycle_begin(kind="decode")
    _pt.begin("outer"); _pt.begin("a")
    work(2_000_000)
    _pt.end("a"); _pt.begin("b")
    work(2_000_000)
    _pt.end("b"); _pt.end("outer")
    _pt.cycle_end()
pool = _pt._timer.pool
print("POOL", len(pool), len({id(e) for e in pool}))
_pt.shutdown()
print("RECORDS", torch.RECORDS[0])
"""
    from patchkit.report import load_timing_dir

    records, shared = {}, {}
    for share in (500_000, 0):
        out = tmp_path / ("out%d" % share)
        res = run_script(
            runtime_dir,
            with_fake_torch(fake_torch, body.replace("SHARE", str(share)), LAG_NS=200_000),
            env={"PATCHKIT_TIMER": "events"},
            out_dir=out,
            clock=True,
        )
        assert res.returncode == 0, res.stderr
        size, unique = map(int, res.stdout.split("POOL")[1].split()[:2])
        assert size == unique
        records[share] = int(res.stdout.split("RECORDS")[1])
        (proc,) = load_timing_dir(out)
        assert proc.unresolved == 0
        by_cycle = {}
        for p in proc.phases:
            by_cycle.setdefault(p["cycle"], {})[p["name"]] = p
        assert len(by_cycle) == 50
        shared[share] = 0
        for phases in by_cycle.values():
            a, b, outer = phases["a"], phases["b"], phases["outer"]
            assert a["dev_ns"] >= 2_000_000 and b["dev_ns"] >= 2_000_000
            assert outer["dev_off_ns"] <= a["dev_off_ns"]
            assert a["dev_off_ns"] + a["dev_ns"] <= b["dev_off_ns"]
            assert b["dev_off_ns"] + b["dev_ns"] <= outer["dev_off_ns"] + outer["dev_ns"]
            if b["dev_off_ns"] == a["dev_off_ns"] + a["dev_ns"]:
                shared[share] += 1  # one event marked a's end and b's start
    # per cycle: 2 (cycle) + 6 phase marks; sharing pairs cycle/outer, outer/a, a/b, b/outer
    # and the cycle's end with outer's end: 4, in every cycle on the fake clock (on a real one a
    # preempted host missed a pairing now and then)
    assert records[0] == 50 * 8 and shared[0] == 0
    assert records[500_000] == 50 * 4
    assert shared[500_000] == 50


def test_multiprocessing_child_writes_its_last_records(runtime_dir, fake_torch, tmp_path):  # noqa: F811
    """A forked multiprocessing child leaves through os._exit (no atexit): the runtime
    registers with multiprocessing's finalizers, so the child's exit record and the device
    times of its last cycles are written even when it ends by KeyboardInterrupt."""
    out = tmp_path / "out"
    res = run_script(
        runtime_dir,
        with_fake_torch(
            fake_torch,
            """
import multiprocessing as mp
import phase_timer as _pt

def serve(stop_by_interrupt):
    for i in range(5):
        _pt.cycle_begin(kind="decode"); _pt.begin("verify"); _pt.end("verify"); _pt.cycle_end()
    if stop_by_interrupt:
        raise KeyboardInterrupt

if __name__ == "__main__":
    ctx = mp.get_context("fork")
    for flag in (False, True):
        p = ctx.Process(target=serve, args=(flag,))
        p.start(); p.join()
        print("EXIT", p.exitcode)
""",
            LAG_NS=50_000_000,
        ),
        env={"PATCHKIT_TIMER": "events"},
        out_dir=out,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["EXIT", "0", "EXIT", "1"]
    assert "KeyboardInterrupt" in res.stderr
    from patchkit.report import load_timing_dir

    procs = load_timing_dir(out)
    assert len(procs) == 2
    for proc in procs:  # the GPU stand-in is 50 ms behind: only the exit wait resolves them
        assert proc.stats is not None and proc.unresolved == 0
        assert [c["cycle"] for c in proc.cycles] == list(range(5))


def test_cycle_phase_lines_by_template_equal_line_by_line(runtime_dir, tmp_path):
    """The per-shape template gives the very bytes the general formatter gives."""
    res = run_script(
        runtime_dir,
        """
import json
import phase_timer as pt
names = {None: "null"}
recs = [["draft", 7, 0, None, 100, 900, None, None, False, False, None],
        ['step "q"\\\\', 7, 1, "draft", 150, 300, None, None, True, False, {"step": 0}],
        ["ünï", 7, 1, "draft", 310, 500, None, None, False, False, {"k": [1, 2.5, None]}],
        ["50%s %d", 7, 1, "draft", 510, 600, None, None, False, False, {"%": "%s"}],
        ["draft", 7, 0, None, 910, 990, None, None, False, False, None]]
shapes = {}
for _ in range(2):  # the second time from the cached template
    by_template = pt._host_phase_lines(recs, names, shapes)
    by_line = "".join(pt._phase_line(r, names) for r in recs)
    assert by_template == by_line, (by_template, by_line)
assert len(shapes) == 1
for line in by_template.splitlines():
    json.loads(line)
print("SAME")
""",
        out_dir=tmp_path / "out",
    )
    assert res.returncode == 0, res.stderr
    assert "SAME" in res.stdout


# CYCLES cycles of one phase; after each cycle_end, what the file holds (cycle and dev record
# indices, the timer's write count); then IDLE_S seconds idle and the dev records on disk then
BATCH_LOOP = """
import glob, json, os, time
import phase_timer as _pt
_pt.configure()
seen = []
for i in range(CYCLES):
    _pt.cycle_begin(kind="decode")
    _pt.begin("verify"); time.sleep(0.001); _pt.end("verify")
    tokens = [i, i]
    _pt.cycle_end(tokens=tokens)
    tokens.append(99)  # after cycle_end: the cycle's line keeps what cycle_end saw
    path = glob.glob(os.path.join(os.environ["PATCHKIT_TIMER_DIR"], "*.jsonl"))
    recs = [json.loads(l) for l in open(path[0])] if path else []
    seen.append(([r["cycle"] for r in recs if r["kind"] == "cycle"],
                 [r["cycle"] for r in recs if r["kind"] == "dev"], _pt._timer.counts["writes"]))
time.sleep(IDLE_S)
(path,) = glob.glob(os.path.join(os.environ["PATCHKIT_TIMER_DIR"], "*.jsonl"))
print("SEEN", json.dumps(seen))
print("IDLE", json.dumps([json.loads(l)["cycle"] for l in open(path) if '"kind":"dev"' in l]))
"""


def _batch_loop(runtime_dir, fake_torch, out, cycles, idle_s, env):  # noqa: F811
    """BATCH_LOOP in a fresh interpreter: (what each cycle_end left on disk, the dev records
    after the idle time, every record at exit)."""
    body = BATCH_LOOP.replace("CYCLES", str(cycles)).replace("IDLE_S", str(idle_s))
    res = run_script(runtime_dir, with_fake_torch(fake_torch, body, LAG_NS=0), env=env, out_dir=out)
    assert res.returncode == 0, res.stderr
    seen = json.loads(res.stdout.split("SEEN")[1].split("IDLE")[0])
    (recs,) = read_records(out).values()
    return seen, json.loads(res.stdout.split("IDLE")[1]), recs


def test_resolve_batch_reads_device_times_n_at_a_time_and_writes_every_cycle(
    runtime_dir,
    fake_torch,  # noqa: F811
    tmp_path,
):
    """PATCHKIT_TIMER_RESOLVE_BATCH=4: device times are read at every 4th timed cycle, four in
    a row; each cycle's own lines (phases, cycle record) are still on disk when its cycle_end
    returns, one write per cycle; once idle, the flusher reads the waiting ones (a batch the
    user set); at exit every cycle has its dev record."""
    out = tmp_path / "out"
    env = {"PATCHKIT_TIMER_RESOLVE_BATCH": "4", "PATCHKIT_TIMER_IDLE_FLUSH_MS": "200"}
    seen, idle, recs = _batch_loop(runtime_dir, fake_torch, out, 10, 0.8, env)
    # the GPU is never behind here, so every 4th cycle reads all device times; the others
    # read none, and every cycle's record is written before its cycle_end returns
    for i, (cycles, devs, writes) in enumerate(seen):
        assert cycles == list(range(i + 1)), (i, cycles)
        assert writes == i + 1  # one write per timed cycle
        if (i + 1) % 4 == 0:
            assert devs == list(range(i + 1)), (i, devs)
        else:
            assert devs == list(range(i - (i + 1) % 4 + 1)), (i, devs)
    assert idle == list(range(10))
    assert sorted(r["cycle"] for r in recs if r["kind"] == "dev") == list(range(10))
    assert sorted(r["cycle"] for r in recs if r["kind"] == "cycle") == list(range(10))
    for r in recs:
        if r["kind"] == "cycle":
            assert r["attrs"] == {"kind": "decode", "tokens": [r["cycle"]] * 2}, r
    verify = sorted(r["cycle"] for r in recs if r["kind"] == "phase")
    assert verify == list(range(10))  # each cycle's phase line written once


@pytest.mark.parametrize(
    "env, batch",
    [
        ({}, 16),  # every cycle timed: the default batch
        ({"PATCHKIT_TIMER_SAMPLE": "16"}, 1),  # sampled: one timed cycle in 16 is few enough
        ({"PATCHKIT_TIMER_RESOLVE_BATCH": "1"}, 1),  # the user's setting wins
        ({"PATCHKIT_TIMER_RESOLVE_BATCH": "5", "PATCHKIT_TIMER_SAMPLE": "4"}, 5),
        ({"PATCHKIT_TIMER_RESOLVE_BATCH": "many"}, 16),  # not a number: the default
    ],
)
def test_full_timing_reads_device_times_in_batches_by_default(runtime_dir, fake_torch, tmp_path, env, batch):  # noqa: F811
    """Every cycle timed, events mode: device times are read 16 timed cycles at a time unless
    PATCHKIT_TIMER_RESOLVE_BATCH says otherwise (the header says which); sampled runs read at
    each timed cycle. Every timed cycle's record is on disk at its cycle_end either way, and
    the exit flush reads every device time."""
    seen, _, recs = _batch_loop(
        runtime_dir, fake_torch, tmp_path / "out", 40, 0, dict(env, PATCHKIT_TIMER_SEED="1")
    )
    assert recs[0]["kind"] == "header" and recs[0]["resolve_batch"] == batch
    timed = [r["cycle"] for r in recs if r["kind"] == "cycle" and r.get("timed", True)]
    assert len(timed) == 40 if "PATCHKIT_TIMER_SAMPLE" not in env else 0 < len(timed) < 40
    assert all(i in seen[i][0] for i in timed)  # each timed cycle: on disk when cycle_end returned
    if batch > 1:  # device times only at every batch-th timed cycle (the GPU is never behind)
        assert [len(seen[i][1]) for i in timed[: 2 * batch]] == [
            batch * ((k + 1) // batch) for k in range(2 * batch)
        ]
    assert sorted(r["cycle"] for r in recs if r["kind"] == "dev") == timed


IDLE_KILL = """
import glob, json, os, signal, time
import torch
import phase_timer as _pt
RELAX
_pt.configure()
for i in range(6):
    _pt.cycle_begin(kind="decode")
    _pt.begin("verify"); time.sleep(0.001); _pt.end("verify")
    _pt.cycle_end()
(path,) = glob.glob(os.path.join(os.environ["PATCHKIT_TIMER_DIR"], "*.jsonl"))
before = [json.loads(l)["cycle"] for l in open(path) if '"kind":"dev"' in l]
time.sleep(1.0)
print("BEFORE", json.dumps(before))
print("SETDEV", json.dumps(torch.SET_DEVICE))
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_resolve_batch_idle_flusher_reads_the_waiting_cycles_on_the_ranks_device(
    runtime_dir,
    fake_torch,  # noqa: F811
    tmp_path,
):
    """With PATCHKIT_TIMER_RESOLVE_BATCH the last cycles of a burst wait unresolved; once the
    engine is idle the flusher thread reads their events (after setting this process's CUDA
    device on its own thread) and writes them, so a SIGKILL then (SGLang's shutdown) loses no
    device time."""
    out = tmp_path / "out"
    res = run_script(
        runtime_dir,
        # (no CUDA driver here, so no relaxed capture mode: the batch's reads happen anyway)
        with_fake_torch(fake_torch, IDLE_KILL.replace("RELAX", ""), LAG_NS=0),
        env={"PATCHKIT_TIMER_RESOLVE_BATCH": "4", "PATCHKIT_TIMER_IDLE_FLUSH_MS": "100"},
        out_dir=out,
    )
    assert res.returncode == -signal.SIGKILL, res.stderr
    before = json.loads(res.stdout.split("BEFORE")[1].split("SETDEV")[0])
    assert 4 not in before and 5 not in before  # waiting for the batch when the burst ended
    assert json.loads(res.stdout.split("SETDEV")[1]) == [["patchkit-timer-flush", 3]]
    (recs,) = read_records(out).values()
    assert sorted(r["cycle"] for r in recs if r["kind"] == "dev") == list(range(6))
    assert sorted(r["cycle"] for r in recs if r["kind"] == "cycle") == list(range(6))
    assert not any(r["kind"] == "stats" for r in recs)  # it really died without its exit flush


@pytest.mark.parametrize("sample", ["1", "2"])
def test_idle_flusher_reads_the_last_timed_cycles_device_times_by_default(
    runtime_dir,
    fake_torch,  # noqa: F811
    tmp_path,
    sample,
):
    """Default settings (no resolve batch), a GPU 30 ms behind the host, as SGLang's v2
    worker is at the end of a burst: the last cycles' events are not done at their cycle_end,
    and nothing reads them before SGLang's SIGKILL. The idle flusher does (on the rank's
    device, in relaxed capture mode): every timed cycle keeps its device times. This CPU has
    no CUDA driver, so the driver call that sets relaxed mode is replaced by one that says it
    succeeded (the next test checks what happens when it fails; a CUDA-only test checks the
    real call)."""
    out = tmp_path / "out"
    body = IDLE_KILL.replace("RELAX", "_pt._relax_capture_mode = lambda: True  # no CUDA driver here")
    res = run_script(
        runtime_dir,
        with_fake_torch(fake_torch, body, LAG_NS=30_000_000),
        env={
            "PATCHKIT_TIMER_IDLE_FLUSH_MS": "100",
            "PATCHKIT_TIMER_SAMPLE": sample,
            "PATCHKIT_TIMER_SEED": "3",
        },
        out_dir=out,
    )
    assert res.returncode == -signal.SIGKILL, res.stderr
    (recs,) = read_records(out).values()
    timed = sorted(r["cycle"] for r in recs if r["kind"] == "cycle" and r.get("timed", True))
    before = json.loads(res.stdout.split("BEFORE")[1].split("SETDEV")[0])
    assert timed and timed[-1] not in before  # still unread when the burst ended
    assert len(timed) == (6 if sample == "1" else 3)  # seed 3 times cycles 0, 2 and 5 of 6
    assert json.loads(res.stdout.split("SETDEV")[1]) == [["patchkit-timer-flush", 3]]
    assert sorted(r["cycle"] for r in recs if r["kind"] == "dev") == timed
    assert sorted(r["cycle"] for r in recs if r["kind"] == "cycle") == list(range(6))
    assert not any(r["kind"] == "stats" for r in recs)


def test_idle_flusher_without_relaxed_capture_mode_reads_nothing_by_default(
    runtime_dir,
    fake_torch,  # noqa: F811
    tmp_path,
):
    """Where relaxed capture mode cannot be set (no libcuda.so.1, as on this CPU), the flusher
    reads no event unless PATCHKIT_TIMER_RESOLVE_BATCH asked for it: a query from another
    thread could break a graph capture. The last cycles' device times are then lost to a
    SIGKILL (their host lines are not)."""
    out = tmp_path / "out"
    res = run_script(
        runtime_dir,
        with_fake_torch(fake_torch, IDLE_KILL.replace("RELAX", ""), LAG_NS=30_000_000),
        env={"PATCHKIT_TIMER_IDLE_FLUSH_MS": "100"},
        out_dir=out,
    )
    assert res.returncode == -signal.SIGKILL, res.stderr
    (recs,) = read_records(out).values()
    devs = sorted(r["cycle"] for r in recs if r["kind"] == "dev")
    assert 5 not in devs and devs == list(range(len(devs)))
    assert sorted(r["cycle"] for r in recs if r["kind"] == "cycle") == list(range(6))


def test_relax_capture_mode_is_true_only_with_an_initialised_cuda_driver(runtime_dir, tmp_path):
    """No driver (this CPU): False, never an exception. With one (the H200's cudatests
    stage): False before the driver is initialised (cuInit, which torch does first), True
    after."""
    res = run_script(
        runtime_dir,
        """
import ctypes
import phase_timer as _pt
try:
    cuda = ctypes.CDLL("libcuda.so.1")
except OSError:
    cuda = None
before = _pt._relax_capture_mode()
after = cuda is not None and cuda.cuInit(0) == 0 and _pt._relax_capture_mode()
print("RELAX", cuda is not None, before, after)
""",
        out_dir=tmp_path / "out",
    )
    assert res.returncode == 0, res.stderr
    driver, before, after = res.stdout.split("RELAX")[1].split()
    assert before == "False" and after == driver, res.stdout


@needs_cuda
def test_relaxed_flusher_thread_queries_do_not_break_a_global_graph_capture(runtime_dir, tmp_path):
    """What _relax_capture_mode is for, on a real GPU: while the main thread captures a CUDA
    graph in torch's default (global) mode, an event query from a thread in the default mode
    breaks the capture; from a thread in relaxed mode (the idle flusher's) it does not."""
    res = run_script(
        runtime_dir,
        """
import threading, time
import torch
import phase_timer as _pt
x = torch.randn(512, 512, device="cuda")
ev = torch.cuda.Event(enable_timing=True)
ev.record()
torch.cuda.synchronize()

def capture(relax):
    started, done, seen = threading.Event(), threading.Event(), []
    def other():
        torch.cuda.set_device(torch.cuda.current_device())
        if relax:
            seen.append(("relaxed", _pt._relax_capture_mode()))
        started.wait()
        try:
            seen.append(("query", ev.query()))
        except Exception as exc:
            seen.append(("query error", type(exc).__name__))
        done.set()
    t = threading.Thread(target=other); t.start()
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y = x @ x
    torch.cuda.current_stream().wait_stream(s)
    try:
        with torch.cuda.graph(g):
            y = x @ x
            started.set(); done.wait(5)
            y = y @ x
        g.replay(); torch.cuda.synchronize()
        result = "ok"
    except Exception as exc:
        started.set(); result = "capture failed: " + type(exc).__name__
    t.join()
    try:
        torch.cuda.synchronize()
    except Exception:
        pass
    return result, seen

print("RELAXED", capture(True))
""",
        out_dir=tmp_path / "out",
    )
    assert res.returncode == 0, res.stderr
    line = res.stdout.split("RELAXED")[1]
    assert "('relaxed', True)" in line and "'ok'" in line, res.stdout
