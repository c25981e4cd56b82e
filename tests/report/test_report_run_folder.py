"""`profile.report --timing profile-out/<ts>` (the run folder rather than its
timing/) stopped with `no timing files`, exit 2, no hint. A run folder is read through its
timing/; a folder whose timing files lie deeper (a sweep's points) gets a hint naming them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from support.failures import invoke
from support.timing_files import host_timing_files


@pytest.fixture(scope="module")
def timing(tmp_path_factory) -> Path:
    """A folder of real timing files (the runtime, host mode, one rank)."""
    return host_timing_files(tmp_path_factory.mktemp("site"))


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
