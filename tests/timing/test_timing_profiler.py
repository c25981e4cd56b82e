"""Phases as torch-profiler ranges: a real torch.profiler.profile() around timed cycles (CPU
torch), the runtime copied alone into a folder as a series inserts it."""

import json

import pytest

from support.timing_scripts import needs_torch, read_records, run_script

# each test starts a fresh process that imports torch and runs torch.profiler (3-6 s apiece)
pytestmark = [pytest.mark.slow]

BODY = """
import json, sys
import torch
import phase_timer as _pt
_pt.configure(mode="host", sample=SAMPLE, seed=3)
calls = [0]
enter = _pt._timer.profiler.rf_enter
def counting(name):
    calls[0] += 1
    return enter(name)
_pt._timer.profiler.rf_enter = counting
x = torch.ones(64, 64)

seen = {}

def cycles(n, tag):
    for i in range(n):
        _pt.cycle_begin(kind="decode", batch_size=2)
        seen.setdefault(tag, set()).add(_pt.begin.__qualname__)
        _pt.begin("draft"); _pt.begin("draft_forward"); x @ x; _pt.end("draft_forward")
        _pt.end("draft")
        _pt.begin("target_verify", graph=True); x @ x; _pt.end("target_verify")
        _pt.note(accepted=1)
        _pt.cycle_end()

cycles(20, "before")
before = calls[0]
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
    cycles(10, "during")
during = calls[0] - before
cycles(20, "after")
after = calls[0] - before - during
prof.export_chrome_trace(sys.argv[1] if len(sys.argv) > 1 else "trace.json")
print("RESULT", json.dumps([before, during, after, sorted(seen["before"] | seen["after"]),
                            sorted(seen["during"])]))
"""


def run_profiled(runtime_dir, tmp_path, sample):
    trace = tmp_path / "trace.json"
    body = BODY.replace("SAMPLE", str(sample)).replace(
        'sys.argv[1] if len(sys.argv) > 1 else "trace.json"', repr(str(trace))
    )
    res = run_script(runtime_dir, body, out_dir=tmp_path / "out")
    assert res.returncode == 0, res.stderr
    before, during, after, bound, bound_during = json.loads(res.stdout.split("RESULT")[1])
    events = json.loads(trace.read_text())["traceEvents"]
    return before, during, after, bound, bound_during, events


@needs_torch
@pytest.mark.parametrize("sample", [1, 1000000])
def test_phases_are_ranges_in_a_profiler_trace(runtime_dir, tmp_path, sample):
    """While a profiler records, every cycle (timed or not) and phase is a user annotation
    in its trace, nested as the phases nest; before and after it not one range is opened."""
    before, during, after, bound, bound_during, events = run_profiled(runtime_dir, tmp_path, sample)
    assert before == 0 and after == 0  # no profiler: no record_function at all
    assert during == 10 * 4  # the cycle and its three phases, ten cycles
    assert bound_during == ["_Profiler.begin"] and "_Profiler.begin" not in bound
    spans = [e for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"]
    names = [e["name"] for e in spans]
    for name in ("cycle decode", "draft", "draft_forward", "target_verify"):
        assert names.count(name) == 10, (name, names)
    cycles = sorted((e for e in spans if e["name"] == "cycle decode"), key=lambda e: e["ts"])
    for e in spans:
        if e["name"] == "cycle decode":
            continue
        (_outer,) = [c for c in cycles if c["ts"] <= e["ts"] and e["ts"] + e["dur"] <= c["ts"] + c["dur"]]
        if e["name"] == "draft_forward":
            draft = [
                d
                for d in spans
                if d["name"] == "draft" and d["ts"] <= e["ts"] and e["ts"] + e["dur"] <= d["ts"] + d["dur"]
            ]
            assert len(draft) == 1
    # the matmuls ran inside the phase ranges
    mm = [e for e in events if e.get("ph") == "X" and e.get("name") in ("aten::mm", "aten::matmul")]
    assert mm
    # timing went on as usual: sampled or not, every cycle recorded
    (recs,) = read_records(tmp_path / "out").values()
    cycle_recs = [r for r in recs if r["kind"] == "cycle"]
    assert len(cycle_recs) == 50
    timed = [r for r in cycle_recs if r.get("timed") is not False]
    assert len(timed) == (50 if sample == 1 else 0)  # seed 3: no cycle drawn at 1/1000000
    assert sum(r["kind"] == "phase" for r in recs) == 3 * len(timed)


@needs_torch
def test_profiler_ranges_close_when_calls_do_not_match(runtime_dir, tmp_path):
    """An end() without its begin, a phase left open, a cycle abandoned: every range
    opened is closed (the trace has them all with a duration) and nothing raises."""
    trace = tmp_path / "trace.json"
    res = run_script(
        runtime_dir,
        """
import torch
import phase_timer as _pt
_pt.configure(mode="host")
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
    _pt.cycle_begin(kind="decode")
    _pt.begin("outer"); _pt.begin("left_open"); _pt.end("outer")
    _pt.end("never_begun")
    _pt.begin("abandoned")
    _pt.cycle_begin(kind="decode")          # the previous cycle never ended
    _pt.begin("ok"); _pt.end("ok")
    _pt.cycle_end()
prof.export_chrome_trace(%r)
print("MODE", _pt.current_mode())
"""
        % str(trace),
        out_dir=tmp_path / "out",
    )
    assert res.returncode == 0, res.stderr
    assert "MODE host" in res.stdout
    assert "phase_timer" not in res.stderr and "Traceback" not in res.stderr
    events = json.loads(trace.read_text())["traceEvents"]
    names = sorted(e["name"] for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation")
    assert names == ["abandoned", "cycle decode", "cycle decode", "left_open", "ok", "outer"]
