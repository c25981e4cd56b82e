"""The report over real runtime output (two ranks, host mode) and over device-timed records."""

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from patchkit.errors import InvalidInput
from patchkit.report import OUTPUT_FILES, build_report, build_trace, load_timing_dir, render_table
from patchkit.report.stats import percentile
from patchkit.timing import RUNTIME_PATH
from support.sshd import free_port
from support.timing_files import FakeRuntime

WORKLOAD = """
import sys, time
sys.path.insert(0, {site!r})
import phase_timer as _pt
for i in range(12):
    _pt.cycle_begin(batch_size=2)
    _pt.begin("draft")
    for step in range(3):
        _pt.begin("draft_step")
        time.sleep(0.0004)
        _pt.end("draft_step")
    _pt.end("draft")
    _pt.begin("verify")
    time.sleep(0.0015 + 0.0005 * {rank})
    _pt.end("verify")
    _pt.begin("accept")
    time.sleep(0.0003)
    _pt.end("accept")
    _pt.cycle_end(accepted=[i % 3, 1])
"""


@pytest.fixture(scope="module")
def timing_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("timing")
    site = root / "site"
    site.mkdir()
    shutil.copyfile(RUNTIME_PATH, site / "phase_timer.py")
    out = root / "out"
    procs = []
    for rank in (0, 1):
        env = {
            "PATCHKIT_TIMER_DIR": str(out),
            "PATCHKIT_TIMER_RANK": str(rank),
            "PATCHKIT_TIMER": "host",
            "PATH": "/usr/bin:/bin",
        }
        code = WORKLOAD.format(site=str(site), rank=rank)
        procs.append(subprocess.Popen([sys.executable, "-c", code], env=env))
    assert all(p.wait(timeout=60) == 0 for p in procs)
    return out


@pytest.fixture(scope="module")
def report(timing_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    meta = {"tokens_per_s": 118.5, "baseline_tokens_per_s": 73.2, "run": "unit"}
    return build_report(timing_dir, out, meta=meta), out


def test_summary_counts_and_shares(report):
    summary, _ = report
    assert summary.mode == "host" and summary.basis == "host"
    assert [r["rank"] for r in summary.ranks] == [0, 1]
    assert summary.cycle["count"] == 24
    names = [(e["depth"], e["name"]) for e in summary.phases]
    assert names == [(0, "draft"), (1, "draft_step"), (0, "verify"), (0, "accept")]
    step = summary.phase("draft_step", parent="draft")
    assert step["count"] == 72 and step["per_cycle"] == 3.0
    assert step["host_ms"]["mean"] >= 0.4
    top = [e["share_of_cycle"] for e in summary.phases if e["depth"] == 0]
    assert sum(top) == pytest.approx(summary.top_level_share)
    assert 90.0 <= summary.top_level_share <= 100.0
    assert step["share_of_cycle"] <= summary.phase("draft")["share_of_cycle"]
    verify = summary.phase("verify")
    assert verify["host_ms"]["p50"] <= verify["host_ms"]["p99"] <= verify["host_ms"]["max"]
    # accepted=[i % 3, 1] per cycle on rank 0 only: tokens = accepted + one per request
    accepted = sum((i % 3) + 1 for i in range(12))
    assert summary.decode["accept_length_mean"] == pytest.approx((accepted + 24) / 24)
    assert summary.throughput["speedup"] == pytest.approx(118.5 / 73.2)


def test_outputs_written(report):
    summary, out = report
    assert sorted(p.name for p in out.iterdir()) == sorted(OUTPUT_FILES.values())
    assert (out / "phases.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    data = json.loads((out / "summary.json").read_text())
    # the keys of patchkit.report/1, plus those added since
    assert {
        "schema",
        "mode",
        "basis",
        "ranks",
        "cycle",
        "phases",
        "top_level_share",
        "decode",
        "meta",
        "throughput",
        "files",
        "timing_dir",
        "cycle_kinds",
        "outside_cycles",
        "unresolved",
        "lost_records",
        "overhead",
        "rank_skew",
        "baseline",
        "decode_cycle",
        "window",
        "warmup_cycles",
        "after_window_cycles",
        "stalls",
        "sampling",
        "top_level_share_ci95",
        "share_ci",
        "units",
        "acceptance",  # accept lengths (None: these cycles carry none)
        "prediction",  # the what-if headline (None here: no acceptance)
        "time_split",  # the window's time in decode and prefill cycles
        "cycle_counts",  # every cycle count, named by what it counts
        "warnings",  # stalls, the timer's cost or a drift past their thresholds
        "drift",  # a change in the level of cycle time across the window (patchkit.report.drift)
    } == set(data)
    assert data["window"] is None and data["warmup_cycles"] == 0
    # the runtime's default, a 1 % budget: 12 cycles per rank, before its first decision, all timed
    assert data["sampling"]["budget"]["pct"] == 1.0 and data["sampling"]["timed_cycles"] == 24
    assert data["baseline"] is None  # only profile.remote --baseline measures one
    assert data["schema"] == "patchkit.report/1"
    assert data["phases"][0].keys() >= {
        "name",
        "parent",
        "depth",
        "count",
        "host_ms",
        "dev_ms",
        "share_of_cycle",
        "share_ci95",
        "host_share_ci95",
        "timed_cycles",
    }
    table = (out / "table.txt").read_text()
    assert table == render_table(summary)


def test_table_content(report):
    summary, _ = report
    table = render_table(summary)
    lines = table.splitlines()
    assert lines[0].startswith("patchkit timing: 2 rank(s)")
    assert any(ln.startswith("    draft_step") and " 72 " in ln for ln in lines)
    assert "tokens/s with speculation: 118.5, without: 73.2, speedup 1.62x" in table
    assert "mean accepted length: " in table and "run: unit" in table
    assert "mean cycle per rank (ms): r0 " in table


def test_trace_structure(report):
    _, out = report
    trace = json.loads((out / "trace.json").read_text())
    events = trace["traceEvents"]
    metas = [e for e in events if e["ph"] == "M"]
    spans = [e for e in events if e["ph"] == "X"]
    assert {e["ph"] for e in events} <= {"M", "X", "i"}  # "i": a stall, if the machine had one
    procs = {e["pid"]: e["args"]["name"] for e in metas if e["name"] == "process_name"}
    assert sorted(procs) == [0, 1] and procs[1].startswith("rank 1 ")
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in metas if e["name"] == "thread_name"}
    assert threads[(0, 1)] == "CPU (host)"
    for e in spans:
        assert isinstance(e["ts"], float) and e["dur"] >= 0 and e["ts"] >= 0
        assert {"name", "cat", "pid", "tid", "args"} <= set(e)
    for pid in (0, 1):
        cycles = [e for e in spans if e["pid"] == pid and e["cat"] == "cycle"]
        assert len(cycles) == 12
        for s in (e for e in spans if e["pid"] == pid and e["name"] == "draft_step"):
            (parent,) = [
                p
                for p in spans
                if p["pid"] == pid and p["name"] == "draft" and p["args"]["cycle"] == s["args"]["cycle"]
            ]
            assert parent["ts"] <= s["ts"] and s["ts"] + s["dur"] <= parent["ts"] + parent["dur"] + 1e-3


def _device_file(path: Path, lag_ns: list[int]):
    """Records shaped as the events mode writes them, with a known host/GPU lag per cycle."""
    header = {
        "kind": "header",
        "schema": "patchkit.timing/1",
        "mode": "events",
        "rank": 0,
        "pid": 7,
        "host": "h",
        "clock": {"host": "time.perf_counter_ns", "host_t0_ns": 1_000, "wall_t0_ns": 5_000_000},
    }
    recs = [header]
    for i, lag in enumerate(lag_ns):
        t0 = 1_000 + i * 10_000_000
        recs.append(
            {
                "kind": "phase",
                "name": "verify",
                "cycle": i,
                "depth": 0,
                "parent": None,
                "t0": t0 + 100_000,
                "t1": t0 + 200_000,
                "host_ns": 100_000,
                "dev_ns": 6_000_000,
                "dev_off_ns": 1_000_000,
                "graph": True,
                "captured": False,
            }
        )
        recs.append(
            {
                "kind": "cycle",
                "cycle": i,
                "t0": t0,
                "t1": t0 + 300_000,
                "host_ns": 300_000,
                "dev_ns": 8_000_000,
                "dev_gap_ns": None if i == 0 else 10_000_000 + lag - lag_ns[i - 1],
                "attrs": {"batch_size": 1, "accepted": 2},
            }
        )
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))


def test_gpu_lane_layout(tmp_path):
    _device_file(tmp_path / "phase-timing.rank0.pid7.jsonl", lag_ns=[50_000, 20_000, 90_000])
    (proc,) = load_timing_dir(tmp_path)
    trace = build_trace([proc])
    gpu = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["tid"] == 2]
    cpu = {
        e["args"]["cycle"]: e
        for e in trace["traceEvents"]
        if e["ph"] == "X" and e["tid"] == 1 and e["cat"] == "cycle"
    }
    gcyc = {e["args"]["cycle"]: e for e in gpu if e["cat"] == "cycle"}
    lags = [gcyc[i]["ts"] - cpu[i]["ts"] for i in range(3)]
    # relative lags are exact; the smallest (cycle 1, 20 us) is placed at zero
    assert lags == pytest.approx([30.0, 0.0, 70.0])
    for e in gpu:
        if e["cat"] == "phase":
            c = gcyc[e["args"]["cycle"]]
            assert e["ts"] == pytest.approx(c["ts"] + 1000.0) and e["dur"] == 6000.0
    summary = build_report(tmp_path, tmp_path / "rep", chart=False)
    assert summary.basis == "device" and summary.mode == "events"
    assert summary.phase("verify")["share_of_cycle"] == pytest.approx(75.0)
    assert summary.phase("verify")["graph"] is True
    assert "verify [graph]" in render_table(summary)


def test_percentile_matches_numpy():
    np = pytest.importorskip("numpy")
    rng = random.Random(4)
    for n in (1, 2, 7, 100):
        vals = [rng.random() for _ in range(n)]
        for q in (0, 50, 99, 100):
            assert percentile(vals, q) == pytest.approx(float(np.percentile(vals, q)))


def test_bad_inputs(tmp_path):
    with pytest.raises(InvalidInput, match="no timing files"):
        load_timing_dir(tmp_path)
    bad = tmp_path / "phase-timing.rank0.pid1.jsonl"
    _device_file(bad, lag_ns=[0, 0])
    lines = bad.read_text().splitlines()
    bad.write_text("\n".join(lines[:2] + ['{"kind": "cyc'] + lines[2:]) + "\n")
    with pytest.raises(InvalidInput, match=r"pid1.jsonl:3: not a JSON record"):
        load_timing_dir(tmp_path)
    bad.write_text("\n".join(lines + ['{"kind": "phase", "na']) + "\n")
    (proc,) = load_timing_dir(tmp_path)
    assert proc.truncated_lines == 1 and len(proc.cycles) == 2
    bad.write_text("\n".join(lines[1:]) + "\n")
    with pytest.raises(InvalidInput, match="first record must be the header"):
        load_timing_dir(tmp_path)


def test_per_request_token_lists_give_the_accept_length():
    """sglang 0.5.23 passes tokens=accept_lens, a list per request, to cycle_end."""
    from patchkit.report.summarize import _decode_stats

    stats = _decode_stats([{"attrs": {"tokens": [3, 4, 2]}}, {"attrs": {"tokens": [4, 4, 4]}}])
    assert stats["request_cycles"] == 6
    assert stats["accept_length_mean"] == 21 / 6
    assert stats["accepted_drafts_mean"] == (21 - 6) / 6


@pytest.fixture
def site(runtime_dir):
    return runtime_dir


def _kinds(pt) -> None:
    """CUDA-graph capture passes (draft steps outside any cycle), then 30 decode cycles with a
    prefill cycle before every tenth."""
    for _ in range(4):
        pt.begin("draft_step")
        pt.end("draft_step")
    for i in range(30):
        if i % 10 == 0:
            pt.cycle_begin(kind="prefill", batch_size=1)
            pt.begin("target_extend")
            pt.sleep(0.02)
            pt.end("target_extend")
            pt.cycle_end()
        pt.cycle_begin(kind="decode", batch_size=4)
        pt.begin("draft")
        for _ in range(2):
            pt.begin("draft_step")
            pt.sleep(0.0005)
            pt.end("draft_step")
        pt.end("draft")
        pt.begin("verify")
        pt.sleep(0.002)
        pt.end("verify")
        pt.cycle_end(accepted=2)


def test_decode_and_prefill_apart_and_warmup_outside(tmp_path):
    out = tmp_path / "out"
    pt = FakeRuntime(step_ns=1000)  # each call 1 us: the phases cover a little less than the cycle
    _kinds(pt)
    pt.write(out)
    summary = build_report(out, tmp_path / "report")
    assert list(summary.cycle_kinds) == ["decode", "prefill"]
    dec, pre = summary.cycle_kinds["decode"], summary.cycle_kinds["prefill"]
    assert dec["cycles"] == 30 and pre["cycles"] == 3
    assert [(e["depth"], e["name"]) for e in dec["phases"]] == [
        (0, "draft"),
        (1, "draft_step"),
        (0, "verify"),
    ]
    assert [e["name"] for e in pre["phases"]] == ["target_extend"]
    # shares are of each kind's own cycle time: the 20 ms prefills do not dilute decode
    # (on the fake clock each call takes 1 us: a decode cycle is 3,009 us, its draft 1,005 and its
    # verify 2,001; a prefill cycle 20,003 us, its target_extend 20,001)
    assert dec["top_level_share"] == pytest.approx(100 * 3006 / 3009)
    assert pre["phases"][0]["share_of_cycle"] == pytest.approx(100 * 20001 / 20003)
    verify = summary.phase("verify", kind="decode")
    assert verify["share_of_cycle"] > summary.phase("verify")["share_of_cycle"]
    assert verify["count"] == 30 and verify["per_cycle"] == 1.0
    # warm-up: counted per name, never a phase of the cycle
    assert summary.outside_cycles == {"draft_step": 4}
    step = summary.phase("draft_step", kind="decode")
    assert step["count"] == 60 and step["outside_cycles"] == 0  # those were top level
    assert summary.phase("draft_step")["count"] == 60
    assert summary.decode["batch_size_mean"] == 4  # the decode cycles only
    table = (tmp_path / "report" / "table.txt").read_text()
    lines = table.splitlines()
    dec_at = lines.index("decode (30 cycles; shares of decode cycle time)")
    pre_at = lines.index("prefill (3 cycles; shares of prefill cycle time)")
    assert dec_at < pre_at
    assert lines[dec_at + 1].startswith("decode cycle ")
    assert any(ln.startswith("    draft_step") and " 60 " in ln for ln in lines[dec_at:pre_at])
    assert "outside any cycle (warm-up; not in the shares): draft_step 4" in table
    data = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert data["cycle_kinds"]["prefill"]["phases"][0]["name"] == "target_extend"
    assert data["outside_cycles"] == {"draft_step": 4}
    assert (tmp_path / "report" / "phases.png").read_bytes()[:4] == b"\x89PNG"


def test_repeated_records_are_dropped_and_merge_is_by_cycle(tmp_path):
    """A write repeated after a KeyboardInterrupt, and device times in a later record."""
    header = {
        "kind": "header",
        "schema": "patchkit.timing/1",
        "mode": "events",
        "rank": 0,
        "pid": 3,
        "host": "h",
        "clock": {"host_t0_ns": 0, "wall_t0_ns": 0},
    }
    phase = {
        "kind": "phase",
        "name": "verify",
        "cycle": 0,
        "depth": 0,
        "parent": None,
        "t0": 10,
        "t1": 60,
        "host_ns": 50,
        "dev_ns": None,
        "dev_off_ns": None,
        "graph": False,
        "captured": False,
    }
    cycle = {
        "kind": "cycle",
        "cycle": 0,
        "t0": 0,
        "t1": 100,
        "host_ns": 100,
        "dev_ns": None,
        "dev_gap_ns": None,
        "attrs": {"kind": "decode"},
    }
    cycle1 = dict(cycle, cycle=1, t0=200, t1=300)
    dev = {
        "kind": "dev",
        "cycle": 0,
        "dev_ns": 400,
        "dev_gap_ns": None,
        "phases": [[300, 20]],
        "attrs": {"accepted": 5},
    }
    recs = [header, phase, cycle, header, phase, cycle, dev, cycle1, dev]
    path = tmp_path / "phase-timing.rank0.pid3.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    (proc,) = load_timing_dir(tmp_path)
    assert proc.repeated == 4 and len(proc.phases) == 1 and len(proc.cycles) == 2
    assert proc.cycles[0]["dev_ns"] == 400 and proc.cycles[0]["attrs"] == {"kind": "decode", "accepted": 5}
    assert proc.phases[0]["dev_ns"] == 300 and proc.phases[0]["dev_off_ns"] == 20
    assert proc.unresolved == 1
    summary = build_report(tmp_path, tmp_path / "rep", chart=False)
    assert summary.unresolved == 1 and summary.basis == "device"
    assert summary.phase("verify")["share_of_cycle"] == pytest.approx(75.0)
    assert "1 cycle(s) without device times" in render_table(summary)


def test_rank_skew_row():
    from patchkit.report.skew import _row

    row = _row("verify", None, 0, {0: [1_000_000, 1_000_000], 1: [1_200_000], 2: [1_100_000]})
    assert row["skew_ms"] == pytest.approx(0.2)
    assert row["skew_pct"] == pytest.approx(0.2 / 1.1 * 100)
    assert row["slowest_rank"] == 1 and row["fastest_rank"] == 0 and row["flagged"]
    even = _row("draft", None, 0, {0: [1_000_000], 1: [1_050_000]})
    assert not even["flagged"] and even["slowest_rank"] == 1
    assert _row("alone", None, 0, {0: [5]}) is None


TWO_RANKS = """
import os, time
import phase_timer as _pt
rank = int(sys.argv[1])
time.sleep(0.4 * rank)         # the processes start apart: their clocks' origins differ
_pt.begin("warmup"); _pt.end("warmup")
_pt.flush()                    # the file exists before torch.distributed knows the rank
import torch
import torch.distributed as dist
dist.init_process_group("gloo", init_method=sys.argv[2], rank=rank, world_size=2)
token = torch.zeros(1)
for i in range(12):
    if rank == 0:
        _pt.cycle_begin(kind="decode", batch_size=2)
        _pt.begin("verify"); time.sleep(0.002); _pt.end("verify")
        _pt.begin("draft"); time.sleep(0.01); _pt.end("draft")
        dist.send(token, 1)
        dist.recv(token, 1)    # rank 1's whole cycle runs inside this one
        _pt.cycle_end()
    else:
        dist.recv(token, 0)
        _pt.cycle_begin(kind="decode", batch_size=2)
        _pt.begin("verify"); time.sleep(0.008); _pt.end("verify")
        _pt.begin("draft"); time.sleep(0.01); _pt.end("draft")
        _pt.cycle_end()
        dist.send(token, 0)
dist.destroy_process_group()
"""


@pytest.mark.slow  # two fresh processes importing torch and joining a gloo group (3-19 s)
def test_two_ranks_through_torch_distributed(site, tmp_path):
    """Two real processes (gloo on loopback): each file named by its torch.distributed
    rank, one trace process per rank on one clock, and the slow phase flagged as skew."""
    pytest.importorskip("torch.distributed")
    out = tmp_path / "out"
    code = f"import sys\nsys.path.insert(0, {str(site)!r})\n" + TWO_RANKS
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PATCHKIT_TIMER") and k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE")
    }
    env.update(PATCHKIT_TIMER_DIR=str(out), PATCHKIT_TIMER="host", GLOO_SOCKET_IFNAME="lo")
    url = f"tcp://127.0.0.1:{free_port()}"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(r), url], env=env, stderr=subprocess.PIPE, text=True
        )
        for r in (0, 1)
    ]
    try:
        for p in procs:
            assert p.wait(timeout=240) == 0, p.stderr.read()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    names = sorted(f.name.split(".pid")[0] for f in out.glob("*.jsonl"))
    assert names == ["phase-timing.rank0", "phase-timing.rank1"]
    loaded = load_timing_dir(out)
    assert [p.rank for p in loaded] == [0, 1]
    for p in loaded:
        assert p.header["rank_source"] == "torch.distributed" and p.header["world_size"] == 2
    summary = build_report(out, tmp_path / "report")
    assert [r["rank_source"] for r in summary.ranks] == ["torch.distributed"] * 2
    skew = summary.rank_skew
    rows = {r["name"]: r for r in skew["phases"]}
    assert skew["kind"] == "decode" and skew["ranks"] == [0, 1]
    assert rows["verify"]["flagged"] and rows["verify"]["slowest_rank"] == 1
    assert rows["verify"]["skew_ms"] == pytest.approx(6.0, abs=3.0)
    assert not rows["draft"]["flagged"]
    assert "verify" in skew["flagged"] and "draft" not in skew["flagged"]
    table = (tmp_path / "report" / "table.txt").read_text()
    assert "rank skew of decode cycles" in table
    assert any(ln.startswith(" !   verify: r0 ") and "slowest r1" in ln for ln in table.splitlines())
    trace = json.loads((tmp_path / "report" / "trace.json").read_text())
    assert trace["otherData"]["clock_alignment"] == "shared monotonic clock"
    events = trace["traceEvents"]
    procs_named = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert sorted(procs_named) == [0, 1] and procs_named[1].startswith("rank 1 ")
    cycles = {(e["pid"], e["args"]["cycle"]): e for e in events if e["ph"] == "X" and e["cat"] == "cycle"}
    for i in range(12):
        outer, inner = cycles[(0, i)], cycles[(1, i)]
        # causality: rank 1's cycle began after rank 0 sent and ended before rank 0 received
        assert outer["ts"] <= inner["ts"]
        assert inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"]


def test_decode_cycle_shares_leave_prefill_cycles_out(tmp_path):
    """One prefill cycle (all phase) and 12 decode cycles whose untimed glue is half of each,
    on the fake clock: the decode-only share is exactly 50 %, the all-cycles share higher."""
    pt = FakeRuntime()
    pt.cycle_begin(kind="prefill", batch_size=2)
    pt.begin("target_extend")
    pt.sleep(0.02)
    pt.end("target_extend")
    pt.cycle_end()
    for _ in range(12):
        pt.cycle_begin(kind="decode", batch_size=2)
        pt.begin("draft_forward")
        pt.sleep(0.002)
        pt.end("draft_forward")
        pt.sleep(0.002)  # untimed glue: half of the decode cycle
        pt.cycle_end(tokens=[2, 3])
    pt.write(tmp_path / "t")
    summary = build_report(tmp_path / "t", tmp_path / "r", chart=False)
    dc = summary.decode_cycle
    assert summary.cycle["count"] == 13 and dc["count"] == 12 and dc["basis"] == "host"
    assert set(dc["phase_shares"]) == {"draft_forward"}
    assert dc["top_level_share"] == pytest.approx(50.0)
    # the prefill cycle (20 ms, all phase) dilutes: (20 + 12 x 2) / (20 + 12 x 4) ms
    assert summary.top_level_share == pytest.approx(100 * 44 / 68)
    assert f"decode cycles only (12): top-level phases cover {dc['top_level_share']:.1f}%" in render_table(
        summary
    )


def test_a_copied_timing_file_is_read_once_and_named(timing_dir, tmp_path):
    """Two files with one process's header (an interrupted fetch that ran again kept both:
    seen on the H200, where the report then counted every cycle twice, as "2 processes")."""
    from patchkit.report import render_table

    copy = tmp_path / "timing"
    shutil.copytree(timing_dir, copy)
    rank0 = sorted(copy.glob("phase-timing.rank0.*.jsonl"))[0]
    twin = rank0.with_name(rank0.stem + ".node0.jsonl")
    shutil.copyfile(rank0, twin)
    plain = build_report(timing_dir, tmp_path / "plain", chart=False)  # the files, not the pictures
    summary = build_report(copy, tmp_path / "out", chart=False)
    assert len(summary.ranks) == len(plain.ranks) == 2
    assert summary.cycle["count"] == plain.cycle["count"] > 0
    (r0,) = [r for r in summary.ranks if r["rank"] == 0]
    assert r0["duplicate_files"] == [twin.name] and r0["file"] == rank0.name
    assert f"note: {twin.name}: a copy of {rank0.name}" in render_table(summary)
    # another process's file with the same rank and pid (another node) is not a copy
    other = copy / "phase-timing.rank0.pid1.node1.jsonl"
    lines = rank0.read_text().splitlines()
    header = json.loads(lines[0])
    header["host"] = "another-node"
    other.write_text("\n".join([json.dumps(header)] + lines[1:]) + "\n")
    assert len(build_report(copy, tmp_path / "out2").ranks) == 3
