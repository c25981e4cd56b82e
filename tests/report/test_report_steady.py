"""Stalls and the measured window, on the records the runtime writes for a decode loop (on a fake
clock: support.timing_files.FakeRuntime, so every time below is exact).

The workload is a decode loop whose cycles run at changing batch sizes; a stall (a sleep of
STALL_S inside draft_forward) is injected at the first cycle of every new batch size, as a
kernel compiled on a cold cache would, and once more at a size already seen. The checks accept
stalls beyond the injected ones (as a shared machine gives the real runtime) and account for
whatever was found.
"""

import json
import random
import re

import pytest

from patchkit.report import build_report, load_timing_dir, render_table
from patchkit.report.stalls import STALL_FACTOR, STALL_FLOOR_MS
from patchkit.report.summarize import summarize
from patchkit.report.window import Window, write_window
from support.timing_files import FakeRuntime

STALL_S = 0.2
SIZES = [32, 31, 29, 30, 16, 7, 3, 2]
AGAIN = 50  # a stall at a batch size already seen


def _loop(folder, stall_s, warmup=0, measured=80, after=0, again=AGAIN):
    """The decode loop on a fake clock (support.timing_files.FakeRuntime), its timing file
    written into ``folder``: (start, end) of the measured window in wall-clock ns."""
    pt = FakeRuntime(step_ns=2_000)
    rng = random.Random(3)
    seen = set()
    for _ in range(3):  # graph capture before anything: outside any cycle
        pt.begin("capture")
        pt.sleep(0.0005)
        pt.end("capture")

    def cycle(i):
        bs = SIZES[i] if i < len(SIZES) else rng.choice(SIZES)
        pt.cycle_begin(kind="decode", batch_size=bs)
        pt.begin("draft_forward")
        pt.sleep(0.002 + rng.uniform(0, 0.0002))
        if bs not in seen or i == again:
            pt.sleep(stall_s)
        seen.add(bs)
        pt.end("draft_forward")
        pt.begin("target_verify")
        pt.sleep(0.005 + rng.uniform(0, 0.0002))
        pt.end("target_verify")
        pt.sleep(0.001)  # glue between the phases
        pt.cycle_end(accepted=2)

    n = 0
    for _ in range(warmup):
        cycle(n)
        n += 1
    start = pt.wall_ns()
    pt.begin("capture")  # inside the window
    pt.sleep(0.0005)
    pt.end("capture")
    for _ in range(measured):
        cycle(n)
        n += 1
    end = pt.wall_ns()
    for _ in range(after):
        cycle(n)
        n += 1
    pt.write(folder)
    return start, end


def _raw_cycles(folder):
    """Cycle and top-level phase times straight from the JSON lines (not through the report)."""
    (path,) = folder.glob("phase-timing.rank0.pid*.jsonl")
    cycles, phases = {}, {}
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        if rec["kind"] == "cycle":
            cycles[rec["cycle"]] = rec
        elif rec["kind"] == "phase" and rec["cycle"] is not None and rec["depth"] == 0:
            phases.setdefault(rec["cycle"], {})[rec["name"]] = rec["host_ns"]
    return cycles, phases


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("steady")
    _loop(root / "stalled", STALL_S)
    _loop(root / "clean", 0.0)
    start, end = _loop(root / "windowed", STALL_S, warmup=24, measured=60, after=5, again=-1)
    write_window(root / "windowed", start, end, source="test")
    return root


def test_stall_accounting(runs, tmp_path):
    summary = build_report(runs / "stalled", tmp_path / "r")
    st = summary.stalls["decode"]
    found = {c["cycle"]: c for c in st["cycles"]}
    injected = list(range(len(SIZES))) + [AGAIN]
    assert set(injected) <= set(found), (sorted(found), st)
    for i in injected:
        c = found[i]
        assert c["phase"] == "draft_forward" and c["ms"] >= STALL_S * 1000
        assert c["first_at_batch_size"] is (i != AGAIN)
        assert c["measure"] == "host"
    assert [found[i]["batch_size"] for i in range(len(SIZES))] == SIZES
    # the rule, checked against the raw records: every stall and only stalls
    cycles, phases = _raw_cycles(runs / "stalled")
    times = sorted(c["host_ns"] / 1e6 for c in cycles.values())
    median = (times[39] + times[40]) / 2
    expected = {
        i
        for i, c in cycles.items()
        if c["host_ns"] / 1e6 > STALL_FACTOR * median and c["host_ns"] / 1e6 - median > STALL_FLOOR_MS
    }
    assert set(found) == expected
    total = sum(cycles[i]["host_ns"] for i in expected) / 1e6
    assert st["count"] == len(expected) and st["total_ms"] == pytest.approx(total)
    all_ms = sum(c["host_ns"] for c in cycles.values()) / 1e6
    assert st["share_of_kind_time"] == pytest.approx(100 * total / all_ms)
    assert st["share_of_kind_time"] > 50  # 9 stalls of 200 ms against 80 cycles of ~8 ms
    assert st["by_phase"]["draft_forward"] == pytest.approx(
        sum(phases[i]["draft_forward"] for i in expected) / 1e6
    )
    assert st["first_at_batch_size"] == len(SIZES)
    # every cycle still counted; stall cycles' calls counted, not in the statistics
    assert summary.cycle["count"] == 80 and summary.decode_cycle["count"] == 80
    assert summary.cycle["steady"] == 80 - len(expected)
    draft = summary.phase("draft_forward", kind="decode")
    assert draft["count"] == 80 and draft["per_cycle"] == 1.0
    assert draft["per_cycle_host_ms"]["n"] == 80 - len(expected)
    assert draft["per_cycle_host_ms"]["max"] < STALL_S * 1000
    # the table's line under the kind, and the trace's marks
    table = render_table(summary)
    line = next(x for x in table.splitlines() if re.match(r"\d+ stalls, ", x))
    assert line.startswith(f"{len(expected)} stalls, ")
    assert re.search(r", [\d.]+ s \(\d+\.\d% of decode time\), in draft_forward", line)
    assert "first cycle at batch sizes 32, 31, 29, 30, 16, 7, 3, 2" in line
    assert "not the first at" in line and "not in the shares" in line
    data = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert set(data["stalls"]["decode"]) >= {"count", "total_ms", "share_of_kind_time", "by_phase", "cycles"}
    assert set(data["stalls"]["decode"]["cycles"][0]) >= {"cycle", "batch_size", "ms", "phase"}
    trace = json.loads((tmp_path / "r" / "trace.json").read_text())
    marked = {
        e["args"]["cycle"]
        for e in trace["traceEvents"]
        if e["ph"] == "X" and e["cat"] == "cycle" and e["args"].get("stall")
    }
    instants = {e["args"]["cycle"] for e in trace["traceEvents"] if e["ph"] == "i"}
    assert marked == instants == expected
    assert all(
        e["name"].endswith(" STALL")
        for e in trace["traceEvents"]
        if e["ph"] == "X" and e["cat"] == "cycle" and e["args"]["cycle"] in expected
    )


def test_steady_shares_match_a_run_without_stalls(runs, tmp_path):
    stalled = build_report(runs / "stalled", tmp_path / "a", chart=False)
    clean = build_report(runs / "clean", tmp_path / "b", chart=False)
    assert stalled.stalls["decode"]["count"] >= len(SIZES) + 1
    for name in ("draft_forward", "target_verify"):
        ours = stalled.phase(name, kind="decode")["share_of_cycle"]
        theirs = clean.phase(name, kind="decode")["share_of_cycle"]
        # two runs on a shared machine: sleeps overshoot by a varying amount
        assert ours == pytest.approx(theirs, abs=4.0), name
    # what the shares were before stalls were kept apart: all cycles' means
    cycles, phases = _raw_cycles(runs / "stalled")
    naive = (
        100 * sum(p["draft_forward"] for p in phases.values()) / sum(c["host_ns"] for c in cycles.values())
    )
    assert naive > stalled.phase("draft_forward", kind="decode")["share_of_cycle"] + 30


def test_warmup_outside_the_window_is_excluded_and_counted(runs, tmp_path):
    folder = runs / "windowed"
    summary = build_report(folder, tmp_path / "r")
    assert summary.warmup_cycles == 24 and summary.after_window_cycles == 5
    assert summary.cycle["count"] == 60 and summary.decode_cycle["count"] == 60
    assert summary.window["source"] == "test"
    assert summary.window["measured"]["end_unix_ns"] > summary.window["measured"]["start_unix_ns"]
    # the warm-up pass saw every batch size (its stalls): none is left in the window
    assert all(c["cycle"] >= 24 for c in summary.stalls["decode"]["cycles"])
    assert not any(c["first_at_batch_size"] for c in summary.stalls["decode"]["cycles"])
    # the capture passes before the window are left out, the one inside it counted
    assert summary.outside_cycles == {"capture": 1}
    assert summary.phase("draft_forward", kind="decode")["count"] == 60
    assert summary.decode["request_cycles"] == sum(
        c["attrs"]["batch_size"] for p in load_timing_dir(folder) for c in p.cycles if 24 <= c["cycle"] < 84
    )
    table = (tmp_path / "r" / "table.txt").read_text()
    assert (
        "measured window from test: 60 cycles inside; 24 warm-up cycles before it and 5 after it left out"
    ) in table
    trace = json.loads((tmp_path / "r" / "trace.json").read_text())
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "cycle"]
    assert sorted(e["args"]["cycle"] for e in spans) == list(range(24, 84))
    # the same folder read with a window covering everything: the warm-up stalls are back
    everything = summarize(load_timing_dir(folder), str(folder), window=Window(0, 2**62))
    assert everything.warmup_cycles == 0 and everything.cycle["count"] == 89
    assert everything.outside_cycles == {"capture": 4}
    assert {c["cycle"] for c in everything.stalls["decode"]["cycles"]} >= set(range(len(SIZES)))
    # and the shares of the window agree with a run that never stalled
    clean = build_report(runs / "clean", tmp_path / "c", chart=False)
    assert summary.phase("draft_forward", kind="decode")["share_of_cycle"] == pytest.approx(
        clean.phase("draft_forward", kind="decode")["share_of_cycle"], abs=4.0
    )


def test_a_window_that_holds_no_cycle_is_said(runs, tmp_path):
    folder = runs / "windowed"
    procs = load_timing_dir(folder)
    summary = summarize(procs, str(folder), window=Window(1, 2))
    assert summary.cycle["count"] == 0 and summary.after_window_cycles == 89
    table = render_table(summary)
    assert "no cycle started inside the measured window" in table


def test_a_header_without_clocks_is_refused_with_a_window(tmp_path):
    from patchkit.errors import InvalidInput

    header = {
        "kind": "header",
        "schema": "patchkit.timing/1",
        "mode": "host",
        "rank": 0,
        "pid": 1,
        "clock": {},
    }
    cycle = {"kind": "cycle", "cycle": 0, "t0": 0, "t1": 10, "host_ns": 10, "dev_ns": None, "attrs": {}}
    (tmp_path / "phase-timing.rank0.pid1.jsonl").write_text(
        json.dumps(header) + "\n" + json.dumps(cycle) + "\n"
    )
    write_window(tmp_path, 0, 100)
    with pytest.raises(InvalidInput, match="no clock pair"):
        build_report(tmp_path, tmp_path / "r", chart=False)
