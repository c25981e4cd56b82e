"""Issue 28.7: `profile.report --timing profile-out/<ts>` (the run folder rather than its
timing/) stopped with `no timing files`, exit 2, no hint. A run folder is read through its
timing/; a folder whose timing files lie deeper (a sweep's points) gets a hint naming them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from failure_support import invoke

WORKLOAD = """
import sys, time
sys.path.insert(0, {site!r})
import phase_timer as _pt
for i in range(6):
    _pt.cycle_begin(batch_size=1)
    _pt.begin("draft")
    time.sleep(0.0005)
    _pt.end("draft")
    _pt.begin("verify")
    time.sleep(0.001)
    _pt.end("verify")
    _pt.cycle_end(accepted=[2])
"""


@pytest.fixture(scope="module")
def timing(tmp_path_factory, runtime_dir_module) -> Path:
    """A folder of real timing files (the runtime, host mode, one rank)."""
    out = tmp_path_factory.mktemp("timing") / "timing"
    env = {"PATCHKIT_TIMER_DIR": str(out), "PATCHKIT_TIMER": "host", "PATH": "/usr/bin:/bin"}
    code = WORKLOAD.format(site=str(runtime_dir_module))
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60)
    return out


@pytest.fixture(scope="module")
def runtime_dir_module(tmp_path_factory) -> Path:
    from patchkit.timing import RUNTIME_PATH

    folder = tmp_path_factory.mktemp("site")
    shutil.copyfile(RUNTIME_PATH, folder / "phase_timer.py")
    return folder


def test_a_run_folder_is_read_through_its_timing(tmp_path, timing):
    run = tmp_path / "profile-out" / "20260101-120000"
    shutil.copytree(timing, run / "timing")
    proc = invoke("profile.report", "--timing", str(run), "--out", str(tmp_path / "report"))
    assert proc.returncode == 0, proc.stderr
    assert f"--timing {run} is a run folder: reading its timing/ ({run / 'timing'})" in proc.stderr
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["cycle"]["count"] == 6


def test_timing_files_deeper_down_are_named(tmp_path, timing):
    sweep = tmp_path / "sweep"
    for point in ("k=2", "k=4"):
        shutil.copytree(timing, sweep / "points" / point / "timing")
    proc = invoke("profile.report", "--timing", str(sweep), "--out", str(tmp_path / "report"))
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert line.startswith(f"profile: --timing {sweep}: no timing files (phase-timing.rank*.pid*.jsonl)")
    assert f"below it: {sweep}/points/k=2/timing, {sweep}/points/k=4/timing (give one of them" in line
    assert not (tmp_path / "report").exists()


def test_a_timing_folder_itself_still_works(tmp_path, timing):
    proc = invoke("profile.report", "--timing", str(timing), "--out", str(tmp_path / "report"))
    assert proc.returncode == 0, proc.stderr
    assert "run folder" not in proc.stderr
