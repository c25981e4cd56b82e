"""profile.run on the embedded default, end to end on the CPU at the reduced "ci" size.

Real components throughout: the pinned transformers wheel installed with pip into a
temporary site, the engine's verify/apply/revert/status, the patched assisted generation in
a subprocess, the report. Also: revert on a failing workload (injected and real), and on
Ctrl-C (SIGINT to the profile process, and to its whole process group like a terminal).
"""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

import pytest

from patchkit import ops
from patchkit.profile import run_default
from patchkit.profile.site import DEFAULT_SERIES, site_state
from support.cli import interrupt, invoke, module, popen_module
from support.default_site import PHASE_TIMER, site  # noqa: F401  (site: a pytest fixture)
from support.requires import requires
from support.upstream import REPO

# torch and transformers' dependencies (the profile extra), asked without importing them
pytestmark = requires("torch", "huggingface_hub", reason="the profile extra")

TOP_PHASES = ["draft", "verify", "accept", "kv_crop", "update_strategy", "bookkeeping"]
NESTED = {"draft_cache": "draft", "draft_generate": "draft", "verify_forward": "verify"}


def assert_pristine(root: Path) -> None:
    result = ops.status(str(DEFAULT_SERIES), [str(root)], ops.Options(layout="installed"))
    assert result.exit_code == 0 and result.hosts[0].state == "pristine", result.hosts[0]
    assert not (root / PHASE_TIMER).exists()
    assert "_pt." not in (root / "transformers/generation/utils.py").read_text()


def test_site_is_a_real_installed_layout(site):  # noqa: F811
    info = site / "transformers-5.17.0.dist-info"
    assert (info / "METADATA").read_text().count("Version: 5.17.0") == 1
    assert (info / "RECORD").is_file()  # installed by pip, not assembled by hand
    assert (site / "transformers" / "models" / "llama" / "modeling_llama.py").is_file()
    assert_pristine(site)


@pytest.mark.slow
def test_default_run_end_to_end(site, tmp_path):  # noqa: F811
    out = io.StringIO()
    outcome = run_default(
        tmp_path / "out", size="ci", site=site, stream=out, timeout=300, warmup=False
    )  # every recorded cycle is a measured one (counted below)
    run_dir = outcome.run_dir
    assert run_dir.parent == tmp_path / "out"
    assert_pristine(site)

    # the phases, all timed, with sensible counts and nesting
    summary = json.loads((run_dir / "summary.json").read_text())
    phases = {(p["name"], p["parent"]): p for p in summary["phases"]}
    cycles = summary["cycle"]["count"]
    assert cycles > 0
    for name in TOP_PHASES:
        entry = phases[(name, None)]
        assert entry["count"] == cycles and entry["depth"] == 0, name
        assert entry["host_ms"]["mean"] > 0
    for name, parent in NESTED.items():
        assert phases[(name, parent)]["count"] > 0 and phases[(name, parent)]["depth"] == 1
    shares = [phases[(n, None)]["share_of_cycle"] for n in TOP_PHASES]
    assert 95.0 <= sum(shares) <= 100.5, shares
    assert summary["top_level_share"] == pytest.approx(sum(shares))
    assert (
        phases[("verify_forward", "verify")]["share_of_cycle"] <= phases[("verify", None)]["share_of_cycle"]
    )

    # throughput and accepted length, measured two independent ways
    work = json.loads((run_dir / "workload.json").read_text())
    point = work["points"][0]
    model = work["model"]
    assert work["size"] == "ci" and not work["cuda"]
    assert Path(work["transformers_file"]).resolve().is_relative_to(site.resolve())
    assert point["timer_mode"] == "host"
    assert (
        point["assisted"]["tokens"] == point["baseline"]["tokens"] == model["prompts"] * model["new_tokens"]
    )
    assert point["identical_outputs"] == model["prompts"]  # greedy: speculation is lossless
    assert summary["decode"]["tokens"] == point["assisted"]["tokens"]
    assert summary["decode"]["request_cycles"] == cycles == point["assisted"]["target_forwards"]
    k = point["params"]["num_assistant_tokens"]
    assert 1.0 < point["accept_length"] <= k + 1
    assert summary["decode"]["accept_length_mean"] == pytest.approx(point["accept_length"])
    meta = summary["meta"]
    assert meta["tokens_per_s"] > 0 and meta["baseline_tokens_per_s"] > 0
    assert summary["throughput"]["speedup"] == pytest.approx(
        meta["tokens_per_s"] / meta["baseline_tokens_per_s"]
    )

    # the terminal table and the files
    text = out.getvalue()
    assert outcome.table in text and "tokens/s with speculation" in text
    assert "mean accepted length" in text and "verify_forward" in text
    assert (run_dir / "table.txt").read_text() == outcome.table
    png = (run_dir / "phases.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    assert list((run_dir / "timing").glob("phase-timing.rank0.pid*.jsonl"))

    # the trace: valid trace-event JSON, cycle spans containing their phases
    trace = json.loads((run_dir / "trace.json").read_text())
    events = trace["traceEvents"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert "CPU (host)" in " ".join(names)
    spans = [e for e in events if e["ph"] == "X"]
    for e in spans:
        assert {"name", "pid", "tid", "ts", "dur"} <= set(e) and e["dur"] >= 0
    cycle_spans = [e for e in spans if e.get("cat") == "cycle"]
    assert len(cycle_spans) == cycles
    phase_spans = [e for e in spans if e.get("cat") == "phase"]
    assert len(phase_spans) == sum(p["count"] for p in summary["phases"])
    by_cycle = {e["args"]["cycle"]: e for e in cycle_spans}
    for e in phase_spans:
        c = by_cycle[e["args"]["cycle"]]
        assert c["ts"] - 0.01 <= e["ts"] and e["ts"] + e["dur"] <= c["ts"] + c["dur"] + 0.01


@pytest.mark.slow  # a real transformers workload: a warm-up and a measured pass (14 s here)
def test_warmup_runs_before_the_measured_pass_and_window_json_is_written(site, tmp_path):  # noqa: F811
    """warmup on (the default): the first prompt runs plain and assisted before the measured
    pass, with timing on; window.json in timing/ separates its cycles from the measured ones."""
    from patchkit.report import load_timing_dir
    from patchkit.report.window import read_window

    outcome = run_default(
        tmp_path / "out", size="ci", site=site, stream=io.StringIO(), timeout=300, chart=False
    )
    assert_pristine(site)
    point = outcome.workload["points"][0]
    window = read_window(outcome.run_dir / "timing")
    assert window is not None and window.source == "profile.run"
    ws, we = window.warmup
    assert ws < we <= window.start_unix_ns < window.end_unix_ns
    inside = warm = 0
    for proc in load_timing_dir(outcome.run_dir / "timing"):
        for cycle in proc.cycles:
            wall = proc.wall_ns(cycle["t0"])
            inside += window.contains(wall)
            warm += ws <= wall <= we
    # every measured assisted cycle is one target forward; the warm-up had its own cycles
    assert inside == point["assisted"]["target_forwards"]
    assert warm > 0 and warm + inside == sum(
        len(p.cycles) for p in load_timing_dir(outcome.run_dir / "timing")
    )
    assert json.loads((outcome.run_dir / "summary.json").read_text())["meta"]["warmup"] is True


def test_injected_workload_failure_reverts_and_propagates(site, tmp_path):  # noqa: F811
    seen = {}

    def failing(site_, spec, run_dir, **kw):
        seen["state"] = site_state(DEFAULT_SERIES, site_)
        seen["timer"] = (Path(site_) / PHASE_TIMER).is_file()
        raise RuntimeError("workload blew up")

    with pytest.raises(RuntimeError, match="workload blew up"):
        run_default(tmp_path, size="ci", site=site, workload=failing, stream=io.StringIO())
    assert seen == {"state": "applied", "timer": True}  # it really ran on the patched tree
    assert_pristine(site)


@pytest.mark.parametrize("flow", ["run", "sweep"])
def test_an_interrupted_run_is_marked_partial_and_says_so(site, tmp_path, flow):  # noqa: F811
    """An interrupted profile.run (sweep) left a partial profile-out/<ts>/ beside the
    complete ones, and the message did not say so."""
    from patchkit.profile import run_sweep

    def interrupted(site_, spec, run_dir, **kw):
        (Path(run_dir) / "workload.log").write_text("half a run\n")
        raise KeyboardInterrupt

    out = tmp_path / "out"
    (out / "20000101-000000").mkdir(parents=True)  # a complete run beside it
    run = run_default if flow == "run" else run_sweep
    with pytest.raises(KeyboardInterrupt) as info:
        run(out, size="ci", site=site, workload=interrupted, stream=io.StringIO())
    (partial,) = [p for p in out.iterdir() if p.name != "20000101-000000"]
    assert partial.name.endswith(".partial") and (partial / "workload.log").read_text() == "half a run\n"
    assert str(info.value) == f"the tree was reverted; the incomplete run's files are in {partial}"
    assert_pristine(site)


@pytest.mark.parametrize("flow", ["run", "sweep"])
def test_a_bad_series_leaves_no_run_folder(tmp_path, flow):
    """The series is read before OUT/<timestamp> is made: a bad one left an empty run folder."""
    from patchkit.errors import PatchkitError
    from patchkit.profile import run_sweep

    run = run_default if flow == "run" else run_sweep
    with pytest.raises(PatchkitError):
        run(tmp_path / "out", size="ci", series_dir=tmp_path / "no-series", site=tmp_path / "site")
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


@pytest.mark.slow  # the real workload process, torch imported, until it fails (4-8 s)
def test_real_workload_failure_reverts_and_exits_1(site, tmp_path):  # noqa: F811
    """The child fails for real (CUDA asked for on a CPU-only torch): exit 1, log tail, pristine."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    args = [
        "run",
        "--size",
        "ci",
        "--device",
        "cuda",
        "--site",
        str(site),
        "--out",
        str(tmp_path),
        "--no-chart",
    ]
    proc = module("patchkit.profile", *args, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "the workload failed" in proc.stderr and "sees no CUDA device" in proc.stderr
    assert "reverted" in proc.stderr
    assert_pristine(site)


def test_bad_arguments_exit_2_before_touching_the_tree(site, tmp_path):  # noqa: F811
    args = ["run", "--size", "huge", "--site", str(site), "--out", str(tmp_path)]
    proc = module("patchkit.profile", *args, timeout=60)
    assert proc.returncode == 2 and "--size 'huge'" in proc.stderr
    assert_pristine(site)


def _workload_children(marker: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if "patchkit.profile.workload" in cmd and marker in cmd:
                pids.append(int(entry.name))
    return pids


@pytest.mark.slow  # the real workload process, torch imported, until the signal (3-6 s apiece)
@pytest.mark.parametrize("to_group", [False, True], ids=["sigint-process", "ctrl-c-group"])
def test_ctrl_c_reverts_and_leaves_no_child(site, tmp_path, to_group):  # noqa: F811
    out = tmp_path / "out"
    args = ["run", "--size", "ci", "--site", str(site), "--out", str(out), "--no-chart"]
    lines = []
    with popen_module("patchkit.profile", *args, cwd=REPO) as proc:
        deadline = time.monotonic() + 120
        for line in proc.stderr:  # not a terminal: one line per stage
            lines.append(line)
            if "building the ci models" in line or "warming up" in line:
                break
            assert time.monotonic() < deadline, "".join(lines)
        assert site_state(DEFAULT_SERIES, site) == "applied"
        assert _workload_children(str(out)), "the workload child should be running"
        rest = interrupt(proc, group=to_group)
    err = "".join(lines) + (rest or "")
    assert proc.returncode == 130, err
    assert "interrupted; the tree was reverted" in err and "patch.status: pristine" in err
    assert_pristine(site)
    assert _workload_children(str(out)) == []
    run_dirs = list(out.iterdir())
    assert len(run_dirs) == 1 and not (run_dirs[0] / "summary.json").exists()
    # marked incomplete, and the message says where it is
    assert run_dirs[0].name.endswith(".partial"), run_dirs
    assert f"the incomplete run's files are in {run_dirs[0]}" in err


@pytest.mark.slow
def test_cli_with_a_relative_out_dir(site, tmp_path):  # noqa: F811
    """As users type it: `invoke profile.run` from another folder, output folder relative to it."""
    proc = invoke(
        "-r",
        str(REPO),
        "profile.run",
        "--size",
        "ci",
        "--site",
        str(site),
        "--out",
        "rel-out",
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = (tmp_path / "rel-out").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["cycles"] > 0 if "cycles" in summary else summary
    assert (run_dir / "trace.json").is_file() and (run_dir / "phases.png").is_file()
    assert_pristine(site)
