"""Scenarios of the timing runtime, each in a fresh interpreter with the runtime copied alone
into a folder (conftest.py's ``runtime_dir``), as a series inserts it: run_script runs one and
read_records reads the timing files it wrote; with_fake_torch puts the CUDA stand-in
(support/fake_cuda_torch.py) first, from the folder of the fixture ``fake_torch``, imported by
name into the test modules that use it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from support.requires import requires

needs_torch = requires("torch")


# tests/support/clock/fake_clock.py, alone in its folder: a scenario run with clock=True imports
# it before anything else, so the runtime binds the fake clock
CLOCK_DIR = Path(__file__).resolve().parent / "clock"


def run_script(runtime_dir, body, env=None, out_dir=None, clock=False):
    """``body`` in a fresh interpreter with the runtime's folder first on sys.path.
    ``clock``: on the fake clock (``work(ns)`` is a phase of exactly ``ns``; see fake_clock.py),
    with the idle flusher asleep so that no second thread reads it."""
    script = "import sys\nsys.path.insert(0, %r)\n" % str(runtime_dir)
    if clock:
        script += "sys.path.append(%r)\nfrom fake_clock import work\n" % str(CLOCK_DIR)
    script += textwrap.dedent(body)
    full_env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PATCHKIT_TIMER") and k not in ("RANK", "LOCAL_RANK")
    }
    if out_dir is not None:
        full_env["PATCHKIT_TIMER_DIR"] = str(out_dir)
    if clock:
        full_env["PATCHKIT_TIMER_IDLE_FLUSH_MS"] = "3600000"
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", script],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(runtime_dir),
    )


def read_records(out_dir):
    """{file name: its records} of every timing file in ``out_dir``."""
    files = sorted(Path(out_dir).glob("phase-timing.rank*.pid*.jsonl"))
    return {f.name: [json.loads(line) for line in f.read_text().splitlines()] for f in files}


FAKE_TORCH = Path(__file__).resolve().parent / "fake_cuda_torch.py"


@pytest.fixture
def fake_torch(tmp_path):
    """A folder whose torch.py is the CUDA stand-in (see fake_cuda_torch.py)."""
    folder = tmp_path / "fake"
    folder.mkdir()
    shutil.copyfile(FAKE_TORCH, folder / "torch.py")
    return folder


def with_fake_torch(folder, body, **settings):
    """``body`` for run_script, after importing the stand-in torch from ``folder`` (the
    ``fake_torch`` fixture's) and setting its module attributes ``settings``."""
    lines = ["sys.path.insert(0, %r)" % str(folder), "import torch"]
    lines += ["torch.%s = %r" % (k, v) for k, v in settings.items()]
    return "\n".join(lines) + "\n" + textwrap.dedent(body)
