"""Sampled timing (PATCHKIT_TIMER_SAMPLE): every cycle recorded, about one in N timed.

Each scenario runs the runtime in a fresh interpreter, copied alone into a folder as a
series inserts it (helpers from support/timing_scripts.py). The events mode runs through the
CUDA stand-in of tests/support/fake_cuda_torch.py (no GPU here).
"""

import json
import math

import pytest

from support.timing_scripts import fake_torch, read_records, run_script, with_fake_torch  # noqa: F401

LOOP = """
import phase_timer as _pt
for i in range(CYCLES):
    _pt.cycle_begin(kind="decode", batch_size=4 + i % 2)
    _pt.begin("draft"); _pt.begin("draft_step"); _pt.end("draft_step"); _pt.end("draft")
    _pt.begin("long" if i % 2 == 0 else "short"); _pt.end("long" if i % 2 == 0 else "short")
    _pt.note(accepted=i % 3)
    _pt.cycle_end(tokens=i % 3 + 1)
"""


def loop(cycles):
    return LOOP.replace("CYCLES", str(cycles))


def binomial_ok(k, n, p, sds=5.0):
    """k successes of n draws with probability p, within `sds` standard deviations."""
    return abs(k - n * p) <= sds * math.sqrt(n * p * (1 - p))


def one_file(out):
    (recs,) = read_records(out).values()
    return recs


def test_every_cycle_recorded_about_one_in_n_timed(runtime_dir, tmp_path):
    out = tmp_path / "out"
    res = run_script(runtime_dir, loop(800), env={"PATCHKIT_TIMER_SAMPLE": "4"}, out_dir=out)
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""
    recs = one_file(out)
    header = recs[0]
    assert header["sampling"]["every"] == 4 and header["sampling"]["method"] == "bernoulli"
    assert isinstance(header["sampling"]["seed"], int)
    cycles = [r for r in recs if r["kind"] == "cycle"]
    assert sorted(c["cycle"] for c in cycles) == list(range(800))  # count = cycles run
    timed = {c["cycle"] for c in cycles if c.get("timed") is not False}
    untimed = [c for c in cycles if c.get("timed") is False]
    assert len(timed) + len(untimed) == 800
    assert binomial_ok(len(timed), 800, 0.25), len(timed)
    # untimed cycles: host times and every attr, no phase of theirs anywhere
    for c in untimed:
        i = c["cycle"]
        assert c["attrs"] == {
            "kind": "decode",
            "batch_size": 4 + i % 2,
            "accepted": i % 3,
            "tokens": i % 3 + 1,
        }
        assert c["t1"] >= c["t0"] and c["host_ns"] == c["t1"] - c["t0"]
        assert c["dev_ns"] is None and "ab" not in c
    phases = [r for r in recs if r["kind"] == "phase"]
    assert {p["cycle"] for p in phases} == timed
    assert len(phases) == 3 * len(timed)
    for c in cycles:
        if c["cycle"] in timed:
            assert "timed" not in c and c["attrs"]["accepted"] == c["cycle"] % 3
    stats = recs[-1]
    assert stats["kind"] == "stats" and stats["records"] == len(recs) - 2
    assert stats["abandoned"] == 0 and stats["unmatched_end"] == 0
    # the report's loader keeps every cycle and counts only the timed ones as timed
    from patchkit.report import load_timing_dir

    (proc,) = load_timing_dir(out)
    assert len(proc.cycles) == 800
    assert {c["cycle"] for c in proc.timed_cycles} == timed


def test_full_timing_without_sampling_has_no_sampling_header(runtime_dir, tmp_path):
    out = tmp_path / "out"
    res = run_script(runtime_dir, loop(50), env={"PATCHKIT_TIMER_SAMPLE": "1"}, out_dir=out)
    assert res.returncode == 0, res.stderr
    recs = one_file(out)
    assert "sampling" not in recs[0]
    cycles = [r for r in recs if r["kind"] == "cycle"]
    assert len(cycles) == 50 and not any("timed" in c for c in cycles)
    assert sum(r["kind"] == "phase" for r in recs) == 150


def timed_set(runtime_dir, out, seed, sample="3", cycles=300):
    env = {"PATCHKIT_TIMER_SAMPLE": sample}
    if seed is not None:
        env["PATCHKIT_TIMER_SEED"] = str(seed)
    res = run_script(runtime_dir, loop(cycles), env=env, out_dir=out)
    assert res.returncode == 0, res.stderr
    recs = one_file(out)
    return recs[0]["sampling"], {
        r["cycle"] for r in recs if r["kind"] == "cycle" and r.get("timed") is not False
    }


def test_seed_reproduces_the_choice(runtime_dir, tmp_path):
    head_a, a = timed_set(runtime_dir, tmp_path / "a", 1234)
    head_b, b = timed_set(runtime_dir, tmp_path / "b", 1234)
    head_c, c = timed_set(runtime_dir, tmp_path / "c", 99)
    assert head_a["seed"] == head_b["seed"] == 1234
    assert head_a["seed_source"] == "env:PATCHKIT_TIMER_SEED"
    assert a == b and a != c
    assert head_c["seed"] == 99
    # no seed given: one is drawn and written down, and it reproduces its run
    head_d, d = timed_set(runtime_dir, tmp_path / "d", None)
    assert head_d["seed_source"] in ("parent", "pid+time")
    _, again = timed_set(runtime_dir, tmp_path / "e", head_d["seed"])
    assert again == d


def test_no_periodic_aliasing(runtime_dir, tmp_path):
    """A workload alternating two kinds of cycle (period 2) sampled with N=2: every-other-
    cycle sampling would time one kind only; the Bernoulli choice times both about equally,
    so the timed phases' mix matches the workload's."""
    out = tmp_path / "out"
    res = run_script(
        runtime_dir, loop(1200), env={"PATCHKIT_TIMER_SAMPLE": "2", "PATCHKIT_TIMER_SEED": "7"}, out_dir=out
    )
    assert res.returncode == 0, res.stderr
    recs = one_file(out)
    timed = [r["cycle"] for r in recs if r["kind"] == "cycle" and r.get("timed") is not False]
    even = sum(1 for i in timed if i % 2 == 0)
    assert binomial_ok(even, 600, 0.5) and binomial_ok(len(timed) - even, 600, 0.5)
    names = [r["name"] for r in recs if r["kind"] == "phase" and r["depth"] == 0]
    longs, shorts = names.count("long"), names.count("short")
    assert longs == even and shorts == len(timed) - even
    assert abs(longs / (longs + shorts) - 0.5) < 0.1
    # and the choice is not periodic with a short period either
    flags = [int(i in set(timed)) for i in range(1200)]
    for period in (2, 3, 4, 8):
        same = sum(flags[i] == flags[i + period] for i in range(1200 - period))
        assert same < 0.65 * (1200 - period), period


def test_untimed_cycle_calls_are_noops(runtime_dir, tmp_path):
    """Inside an untimed cycle begin/end are the module's no-op and note is the cycle's
    own dict update; after its cycle_end the timer's methods are back."""
    res = run_script(
        runtime_dir,
        """
import phase_timer as _pt
_pt.configure(sample=1000000, seed=1)
seen = set()
for i in range(20):
    _pt.cycle_begin(kind="decode")
    seen.add((_pt.begin is _pt._noop, _pt.end is _pt._noop,
              type(_pt.note).__name__, _pt.cycle_end.__qualname__))
    _pt.note(accepted=1)
    _pt.cycle_end()
print("SEEN", sorted(seen))
print("AFTER", _pt.begin == _pt._timer.begin, _pt.cycle_end == _pt._timer.cycle_end)
_pt.begin("outside"); _pt.end("outside")
""",
        out_dir=tmp_path / "out",
    )
    assert res.returncode == 0, res.stderr
    assert "SEEN [(True, True, 'builtin_function_or_method', '_Untimed.cycle_end')]" in res.stdout
    assert "AFTER True True" in res.stdout
    recs = one_file(tmp_path / "out")
    assert [r["name"] for r in recs if r["kind"] == "phase"] == ["outside"]
    assert sum(1 for r in recs if r.get("timed") is False) == 20


def test_events_mode_sampled(runtime_dir, fake_torch, tmp_path):  # noqa: F811
    """Events mode: device records only for timed cycles, no gap measured across untimed
    ones, every event recycled (the pool stays small), nothing left unresolved."""
    out = tmp_path / "out"
    res = run_script(
        runtime_dir,
        with_fake_torch(
            fake_torch,
            loop(600)
            + """
print("POOL", len(_pt._timer.pool), len({id(e) for e in _pt._timer.pool}))
_pt.shutdown()
print("RECORDS", torch.RECORDS[0])
""",
            LAG_NS=100_000,
        ),
        env={"PATCHKIT_TIMER": "events", "PATCHKIT_TIMER_SAMPLE": "5", "PATCHKIT_TIMER_SEED": "3"},
        out_dir=out,
    )
    assert res.returncode == 0, res.stderr
    size, unique = map(int, res.stdout.split("POOL")[1].split()[:2])
    assert size == unique and size < 40
    recs = one_file(out)
    cycles = {r["cycle"]: r for r in recs if r["kind"] == "cycle"}
    timed = sorted(i for i, c in cycles.items() if c.get("timed") is not False)
    assert sorted(cycles) == list(range(600)) and binomial_ok(len(timed), 600, 0.2)
    devs = [r for r in recs if r["kind"] == "dev"]
    assert [d["cycle"] for d in devs] == timed
    for d in devs:  # a gap only from the timed cycle right before
        assert (d["dev_gap_ns"] is not None) == (d["cycle"] - 1 in timed), d
    records = int(res.stdout.split("RECORDS")[1])
    assert records <= len(timed) * 8  # cycle start/end + phase marks, none for untimed
    from patchkit.report import load_timing_dir

    (proc,) = load_timing_dir(out)
    assert proc.unresolved == 0 and len(proc.timed_cycles) == len(timed)
    assert all(p["dev_ns"] is not None for p in proc.phases)


def test_untimed_cycles_never_read_cuda_tensors(runtime_dir, fake_torch, tmp_path):  # noqa: F811
    out = tmp_path / "out"
    res = run_script(
        runtime_dir,
        with_fake_torch(
            fake_torch,
            """
import phase_timer as _pt

class CudaValue:
    is_cuda = True
    def to(self, *a, **k):
        raise AssertionError("an untimed cycle copied a CUDA tensor")
    def tolist(self):
        raise AssertionError("an untimed cycle read a CUDA tensor")

_pt.configure(mode="events", sample=1000000, seed=5)
for i in range(10):
    _pt.cycle_begin(kind="decode", batch_size=2)
    _pt.cycle_end(accepted=1, tokens=CudaValue())
""",
        ),
        out_dir=out,
    )
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""
    cycles = [r for r in one_file(out) if r["kind"] == "cycle"]
    assert len(cycles) == 10
    assert all(c["attrs"] == {"kind": "decode", "batch_size": 2, "accepted": 1} for c in cycles)


def test_sampling_inside_ab_blocks(runtime_dir, fake_torch, tmp_path):  # noqa: F811
    """PATCHKIT_TIMER_AB with PATCHKIT_TIMER_SAMPLE: the timed blocks are sampled (their
    untimed cycles say ab "events", timed false), the off blocks stay off; the report pairs
    the blocks as before, so the pairs measure sampled timing's cost."""
    from patchkit.report import build_report

    out = tmp_path / "out"
    res = run_script(
        runtime_dir,
        with_fake_torch(fake_torch, loop(160)),
        env={
            "PATCHKIT_TIMER": "events",
            "PATCHKIT_TIMER_AB": "20",
            "PATCHKIT_TIMER_SAMPLE": "4",
            "PATCHKIT_TIMER_SEED": "11",
        },
        out_dir=out,
    )
    assert res.returncode == 0, res.stderr
    recs = one_file(out)
    assert recs[0]["ab_cycles"] == 20 and recs[0]["sampling"]["every"] == 4
    cycles = {r["cycle"]: r for r in recs if r["kind"] == "cycle"}
    assert sorted(cycles) == list(range(160))
    on = [c for i, c in cycles.items() if i // 20 % 2 == 0]
    off = [c for i, c in cycles.items() if i // 20 % 2 == 1]
    assert all(c["ab"] == "off" and "timed" not in c for c in off)
    assert all(c["ab"] == "events" for c in on)
    timed = {c["cycle"] for c in on if c.get("timed") is not False}
    assert 0 < len(timed) < len(on) and binomial_ok(len(timed), 80, 0.25)
    assert {r["cycle"] for r in recs if r["kind"] == "phase"} == timed
    summary = build_report(out, tmp_path / "report")
    # 8 blocks: the timed blocks 2, 4 and 6 have an off block on each side
    assert summary.overhead["pairs"] == 3 and summary.overhead["off_cycles"] == 80


def test_bad_sample_settings(runtime_dir, tmp_path):
    out = tmp_path / "out"
    res = run_script(
        runtime_dir,
        loop(10)
        + """
try:
    _pt.configure(sample=0)
except ValueError as exc:
    print("REFUSED", exc)
""",
        env={"PATCHKIT_TIMER_SAMPLE": "eight"},
        out_dir=out,
    )
    assert res.returncode == 0, res.stderr
    assert "PATCHKIT_TIMER_SAMPLE='eight' is not a whole number >= 1; timing every cycle" in res.stderr
    assert "REFUSED sample must be a whole number >= 1, not 0" in res.stdout
    recs = one_file(out)
    assert "sampling" not in recs[0]
    assert sum(r["kind"] == "phase" for r in recs) == 30


@pytest.mark.parametrize("n", [2, 8])
def test_shares_of_timed_cycles_match_full_timing(runtime_dir, tmp_path, n):
    """The phases' mean host time over the timed cycles estimates the mean over all
    cycles: a phase whose length follows the cycle index (period 3) keeps its mean."""
    body = """
import phase_timer as _pt
import time
for i in range(900):
    _pt.cycle_begin(kind="decode")
    _pt.begin("work"); _pt.end("work")
    _pt.note(size=(0, 1, 5)[i % 3])
    _pt.cycle_end()
"""
    out = tmp_path / "out"
    res = run_script(
        runtime_dir, body, env={"PATCHKIT_TIMER_SAMPLE": str(n), "PATCHKIT_TIMER_SEED": "21"}, out_dir=out
    )
    assert res.returncode == 0, res.stderr
    cycles = [r for r in one_file(out) if r["kind"] == "cycle"]
    timed = [c["attrs"]["size"] for c in cycles if c.get("timed") is not False]
    assert len(cycles) == 900
    full_mean = 2.0
    # standard error of the mean of {0,1,5} (sd 2.16) over len(timed) draws
    assert abs(sum(timed) / len(timed) - full_mean) < 5 * 2.16 / math.sqrt(len(timed))


def test_attrs_formatted_directly_equal_json(runtime_dir, tmp_path):
    """The direct formatter of cycle attrs gives the json module's very text."""
    res = run_script(
        runtime_dir,
        r"""
import json
import phase_timer as pt
cases = [{"kind": "decode", "batch_size": 8, "accepted": 3},
         {"kind": 'q"uote\\', "flag": True, "off": False, "none": None, "ünï": "ünï"},
         {"x": 1.5, "n": -3}, {"lst": [1, 2]}, {1: "non-string key"}, {}]
for d in cases:
    want = pt._JSON_ENCODER.encode(pt._plain_attrs(d))
    for _ in range(2):  # the second time from the cache of quoted names
        got = pt._attrs_json(d)
        assert got == want, (got, want)
        json.loads(got)
print("SAME")
""",
        out_dir=tmp_path / "out",
    )
    assert res.returncode == 0, res.stderr
    assert "SAME" in res.stdout


@pytest.mark.parametrize(
    "env",
    [
        {"PATCHKIT_TIMER_SAMPLE": "8"},
        {"PATCHKIT_TIMER_AB": "20"},
        {"PATCHKIT_TIMER_AB": "20", "PATCHKIT_TIMER_SAMPLE": "8"},
    ],
    ids=["sampled", "ab", "ab+sampled"],
)
def test_sigkill_loses_no_untimed_or_off_cycle(runtime_dir, tmp_path, env):
    """SGLang ends its scheduler with SIGKILL once it is idle: every completed cycle, untimed
    (sampling) or in an A/B off block, must be on disk by then (on the H200, batching them
    with no idle flusher lost 2-13 records), while those cycles cost no write of their own."""
    out = tmp_path / "out"
    body = (
        loop(53)
        + "\nimport os, signal, time\n"
        + "time.sleep(0.3)  # idle: the flusher's 50 ms pass\n"
        + "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    res = run_script(runtime_dir, body, env=env, out_dir=out)
    assert res.returncode == -9, (res.returncode, res.stderr)
    recs = one_file(out)
    cycles = sorted(r["cycle"] for r in recs if r["kind"] == "cycle")
    assert cycles == list(range(53))  # 53: inside an off block of 20, not at a block's end
    assert not any(r["kind"] == "stats" for r in recs)  # it really died without its exit record


@pytest.mark.parametrize(
    "env",
    [{"PATCHKIT_TIMER_SAMPLE": "8"}, {"PATCHKIT_TIMER_AB": "20"}],
    ids=["sampled", "ab"],
)
def test_untimed_and_off_cycles_cost_no_write_of_their_own(runtime_dir, tmp_path, env):
    """Their lines go out with the next timed cycle's write (or the idle flusher's): far fewer
    writes than cycles, every cycle on disk at exit, in cycle order."""
    out = tmp_path / "out"
    res = run_script(runtime_dir, loop(400), env=env, out_dir=out)
    assert res.returncode == 0, res.stderr
    recs = one_file(out)
    cycles = [r["cycle"] for r in recs if r["kind"] == "cycle"]
    assert cycles == list(range(400))
    stats = recs[-1]
    timed = sum(
        1 for r in recs if r["kind"] == "cycle" and r.get("timed") is not False and r.get("ab") != "off"
    )
    assert stats["kind"] == "stats" and stats["records"] == len(recs) - 2
    # one write per timed cycle (at most) plus the flusher's and the last: not one per cycle
    assert stats["writes"] <= timed + 10 < 400, (stats["writes"], timed)


def test_ab_b_sample_puts_full_and_sampled_blocks_side_by_side(runtime_dir, tmp_path):
    """PATCHKIT_TIMER_AB_B=sample: first blocks time every cycle ("events"), second blocks are
    sampled ("sampled", about 1 in N timed); bench/gpu/shares_ab.py compares their shares."""
    import subprocess
    import sys
    from pathlib import Path

    out = tmp_path / "out"
    # the phases take exactly their time on the fake clock (tests/support/clock/fake_clock.py,
    # imported before the runtime), and spin(s) moves it on by s. A real clock under load put
    # preemptions into one phase or the other and moved a share of ~60 sampled cycles by up to
    # 12 points; here both kinds of block see the same work exactly
    body = """
def spin(s):
    work(round(s * 1e9))
import phase_timer as _pt
for i in range(600):
    _pt.cycle_begin(kind="decode", batch_size=4)
    _pt.begin("long"); spin(0.06 if i == 102 else 0.003); _pt.end("long")
    _pt.begin("short"); spin(0.001); _pt.end("short")
    _pt.cycle_end()
"""
    # cycle 102 (a full block's third cycle) is a stall: shares_ab leaves it out and says so
    env = {"PATCHKIT_TIMER_AB": "10", "PATCHKIT_TIMER_SAMPLE": "4", "PATCHKIT_TIMER_AB_B": "sample"}
    res = run_script(runtime_dir, body, env=env, out_dir=out, clock=True)
    assert res.returncode == 0, res.stderr
    recs = one_file(out)
    assert recs[0]["ab_b"] == "sample" and recs[0]["ab_cycles"] == 10
    cycles = {r["cycle"]: r for r in recs if r["kind"] == "cycle"}
    assert sorted(cycles) == list(range(600))
    first = [c for i, c in cycles.items() if i // 10 % 2 == 0]
    second = [c for i, c in cycles.items() if i // 10 % 2 == 1]
    assert all(c["ab"] == "events" and "timed" not in c for c in first)
    assert all(c["ab"] == "sampled" for c in second)
    timed_second = [c for c in second if c.get("timed") is not False]
    assert binomial_ok(len(timed_second), 300, 0.25), len(timed_second)
    phase_cycles = {r["cycle"] for r in recs if r["kind"] == "phase"}
    assert phase_cycles == {c["cycle"] for c in first} | {c["cycle"] for c in timed_second}
    tool = Path(__file__).resolve().parents[2] / "bench" / "gpu" / "shares_ab.py"
    report = tmp_path / "shares.json"
    run = subprocess.run(
        [sys.executable, str(tool), str(out), "--json", str(report)], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout + run.stderr
    doc = json.loads(report.read_text())
    # 2 of each 10 left out, and the stalls (cycle 102, and any cycle a loaded machine slept
    # through for over 10 ms): the counts add up to the cycles kept
    left = doc["stalls_left_out"]
    times = sorted(c["host_ns"] for c in cycles.values())
    median = (times[299] + times[300]) / 2  # the stall rule: > 4x the median and > median + 10 ms
    slow = {
        i
        for i, c in cycles.items()
        if i % 10 >= 2 and c["host_ns"] > max(4 * median, median + 10e6) and c.get("timed") is not False
    }
    assert 102 in slow and left["events"] + left["sampled"] == len(slow), (left, sorted(slow))
    assert doc["full_cycles"] + left["events"] == 240
    assert 30 < doc["sampled_timed_cycles"] < 110
    assert "stalls left out: %d full" % left["events"] in run.stdout
    by = {r["phase"]: r for r in doc["phases"]}
    # 3x the work, the larger share (75 % on the fake clock; the bounds below were set for a real
    # clock, where preemptions landing in one phase or the other gave 62 to 87 %)
    assert by["long"]["full"] > by["short"]["full"] > 5, by
    # the same work in both kinds of block: the shares agree (within 0.2 points on this machine
    # idle, 6 runs), or else within their own spread. With both cores taken by busy loops a
    # preempted phase in one of ~60 sampled cycles moves a share by points: 7.6 once in 8 runs
    # with an interval that missed 0, hence 10 points; a sampled share read from the wrong
    # cycles would be off by tens of points
    for row in doc["phases"]:
        lo, hi = row["ci95_pp"]
        assert abs(row["diff_pp"]) < 10 or lo <= 0 <= hi, doc
    assert by["long"]["ci95_pp"][0] <= by["long"]["diff_pp"] <= by["long"]["ci95_pp"][1]
    # the per-cycle figures are kept, and pooling this server with itself gives its own difference
    shares_ab = _shares_ab_module()
    assert len(doc["cycles"]["events"]) == doc["full_cycles"] and doc["cycles"]["names"] == ["long", "short"]
    groups = shares_ab.groups_of(doc["cycles"])
    pooled = shares_ab.pooled([groups, groups], reps=200)
    assert pooled["servers"] == 2 and pooled["sampled_timed_cycles"] == 2 * doc["sampled_timed_cycles"]
    pooled_by = {r["phase"]: r for r in pooled["phases"]}
    assert abs(pooled_by["long"]["diff_pp"] - by["long"]["diff_pp"]) <= 0.011


def _bench_gpu_module(name):
    """bench/gpu/NAME.py, loaded from its file (bench/gpu is no package)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "bench" / "gpu" / ("%s.py" % name)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _shares_ab_module():
    return _bench_gpu_module("shares_ab")


def test_pooled_shares_find_a_real_difference_and_weigh_servers_by_sampled_cycles():
    """shares_ab.pooled: a server whose sampled cycles spend 10 points more in one phase shows
    as +10 points with an interval away from zero; a server without the difference pulls the
    pooled figure down by its weight (its sampled timed cycles)."""
    import random

    shares_ab = _shares_ab_module()
    rng = random.Random(7)

    def server(n_full, n_sampled, sampled_a_share):
        def rows(n, share):
            out = []
            for _ in range(n):
                t = 1000 + rng.randint(-50, 50)
                out.append((t, {"a": t * share, "b": t * (1 - share)}))
            return out

        return {"events": rows(n_full, 0.40), "sampled": rows(n_sampled, sampled_a_share)}

    shifted = server(300, 60, 0.50)
    res = shares_ab.pooled([shifted], reps=300)
    a = {r["phase"]: r for r in res["phases"]}["a"]
    assert abs(a["diff_pp"] - 10) < 0.5 and a["ci95_pp"][0] > 5, a
    same = server(300, 180, 0.40)  # three times the weight, no difference
    both = {r["phase"]: r for r in shares_ab.pooled([shifted, same], reps=300)["phases"]}["a"]
    assert abs(both["diff_pp"] - 2.5) < 0.5, both  # (60 x 10 + 180 x 0) / 240


def test_flusher_in_a_forked_child_and_its_parent(runtime_dir, tmp_path):
    """The idle flusher is per process: a child forked after the parent's started gets its own
    file and its own flusher; both SIGKILLed once idle, both files hold every cycle."""
    out = tmp_path / "out"
    body = (
        loop(30)
        + """
import os, signal, time
pid = os.fork()
if pid == 0:
"""
        + "\n".join("    " + line for line in loop(25).strip().splitlines())
        + """
    time.sleep(0.3)
    os.kill(os.getpid(), signal.SIGKILL)
os.waitpid(pid, 0)
for i in range(12):
    _pt.cycle_begin(kind="decode", batch_size=4)
    _pt.cycle_end()
time.sleep(0.3)
os.kill(os.getpid(), signal.SIGKILL)
"""
    )
    res = run_script(runtime_dir, body, env={"PATCHKIT_TIMER_SAMPLE": "8"}, out_dir=out)
    assert res.returncode == -9, (res.returncode, res.stderr)
    files = read_records(out)
    assert len(files) == 2
    counts = sorted(sum(1 for r in recs if r["kind"] == "cycle") for recs in files.values())
    assert counts == [25, 42]  # the child's 25; the parent's 30 + 12
    for recs in files.values():
        cycles = [r["cycle"] for r in recs if r["kind"] == "cycle"]
        assert cycles == list(range(len(cycles)))
        assert not any(r["kind"] == "stats" for r in recs)


def test_untimed_line_formatted_later_keeps_the_values_of_its_cycle_end(runtime_dir, tmp_path):
    """An untimed cycle's line is formatted at the next write, but from a copy taken at its
    cycle_end: a list the program changes afterwards is written as it was."""
    res = run_script(
        runtime_dir,
        """
import phase_timer as _pt
_pt.configure(sample=1000000, seed=1)
shared = [1, 2]
_pt.cycle_begin(kind="decode", ids=shared, batch_size=2)
_pt.cycle_end()
shared.append(3)
_pt.cycle_begin(kind="decode", ids=shared, batch_size=3)
_pt.cycle_end()
""",
        out_dir=tmp_path / "out",
    )
    assert res.returncode == 0, res.stderr
    cycles = [r for r in one_file(tmp_path / "out") if r["kind"] == "cycle"]
    assert [c["attrs"]["ids"] for c in cycles] == [[1, 2], [1, 2, 3]]
    assert all(c["timed"] is False for c in cycles)


def test_timer_cost_pools_the_verify_bound_pair_apart_from_the_tiny_models(tmp_path):
    """bench/gpu/timer_cost.py: servers of the 8B EAGLE-3 pair (its model path in the server
    command) and of the tiny models are pooled apart, even with the same worker and sampling,
    and the markdown names the 8B rows."""
    import statistics
    from pathlib import Path

    timer_cost = _bench_gpu_module("timer_cost")
    root = tmp_path / "h200"
    for name, model, pairs in (
        ("ovh1_v1", "/tmp/patchkit-models/target", [6.0, 7.0, 8.0]),
        ("e3ovh1_v1", "/tmp/patchkit-models-8b/target", [0.5, 1.0, 1.5]),
    ):
        run = root / "call1" / name
        run.mkdir(parents=True)
        meta = {
            "server command": "python3 -m sglang.launch_server --model-path %s" % model,
            "server environment": "PATCHKIT_TIMER=events PATCHKIT_TIMER_AB=20",
        }
        overhead = {
            "pairing": "both sides",
            "pairs": 3,
            "median_pct": statistics.median(pairs),
            "iqr_pct": [min(pairs), max(pairs)],
            "timed_period_ms": 5.0,
            "off_period_ms": 4.8,
        }
        (run / "summary.json").write_text(json.dumps({"meta": meta, "overhead": overhead}))
        (run / "ab_pairs.json").write_text(json.dumps(dict(overhead, pairs_pct=pairs)))
    (root / "call1" / "runtime.txt").write_text("r1\n")
    pooled = {r["model"]: r for r in timer_cost.pooled(root)}
    assert set(pooled) == {"tiny", "8B EAGLE-3"}
    assert pooled["tiny"]["median_pct"] == 7.0 and pooled["8B EAGLE-3"]["median_pct"] == 1.0
    assert pooled["tiny"]["servers"] == ["call1/ovh1_v1"]
    out = tmp_path / "md"
    assert timer_cost.main([str(root), "--out", str(out)]) in (0, None)
    assert "| v1 (8B EAGLE-3) | every cycle |" in Path(str(out) + ".md").read_text()
