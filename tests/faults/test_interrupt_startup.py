"""Ctrl-C at any instant of a command, start-up included: one line, exit 130, the target as it was.

The real programs, as a user's shell starts them: the venv's ``invoke`` and ``patchkit``
console scripts (this checkout first on PYTHONPATH), each signalled as a terminal's Ctrl-C
signals (its whole process group) after a range of delays, from the moment the interpreter has
read its site-packages (twice what ``python -c pass`` takes here: before that Python is still
starting itself, and no program's code has run) through invoke importing itself, the tasks
loading and the apply running. Every outcome: exit 130 with exactly one line on stderr
("patchkit: interrupted…", no traceback) and the target byte-identical, or a complete apply
that says it was interrupted. Once, invoke's own loading of the tasks printed a traceback or
ended with a silent exit 1.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from patchkit import startup
from support.crash_tree import AFTER, BEFORE, checkout, snapshot
from support.engine import git_diff, make_series, read_tree

pytestmark = [pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DELAYS = 12


@pytest.fixture(scope="module")
def series(tmp_path_factory) -> str:
    work = tmp_path_factory.mktemp("startup-series")
    pinned = {k: v for k, v in BEFORE.items() if v is not None}
    return str(make_series(work / "series", pinned, [("0001-multi.patch", git_diff(BEFORE, AFTER, work))]))


@pytest.fixture(scope="module")
def hooked() -> None:
    """The venv carries patchkit-startup.pth (make setup writes it): Ctrl-C while invoke imports
    itself, before tasks.py runs, is patchkit's to answer only through it."""
    import sysconfig

    pth = Path(sysconfig.get_paths()["purelib"]) / startup.PTH_NAME
    assert pth.is_file() and pth.read_text() == startup.PTH_LINE, (
        f"{pth}: missing or stale; `make setup` writes it (python -m patchkit.startup install)"
    )


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INVOKE_")}
    env["PYTHONPATH"] = str(REPO)
    return env


def _start(argv: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        argv,
        cwd=REPO,
        env=_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _timed(argv: list[str]) -> float:
    began = time.monotonic()
    proc = _start(argv)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, (argv, out, err)
    return time.monotonic() - began


@pytest.mark.parametrize("program", ["invoke", "patchkit"])
def test_ctrl_c_from_start_up_to_the_end_of_an_apply(program, series, hooked, tmp_path):
    root = tmp_path / "t"
    apply = [str(BIN / program), "patch.apply", "--series", series, "--target", str(root)]
    revert = [str(BIN / program), "patch.revert", "--series", series, "--target", str(root)]
    checkout(root)
    python = statistics.median(_timed([sys.executable, "-c", "pass"]) for _ in range(3))
    _timed(apply)  # the series compiled and cached, as for every run below
    took = min(_timed(revert), _timed(apply))
    _timed(revert)
    first, last = 2 * python, 0.8 * took
    assert last > first, (python, took)
    outcomes = []
    for k in range(DELAYS):
        delay = first + (last - first) * k / (DELAYS - 1)
        pristine = snapshot(checkout(root))
        proc = _start(apply)
        time.sleep(delay)
        signalled = proc.poll() is None
        if signalled:
            os.killpg(proc.pid, signal.SIGINT)
            sent = time.monotonic()
        out, err = proc.communicate(timeout=120)
        # a run faster than the others may have been exiting already (os._exit called): nothing
        # to interrupt there, nor anything left to say
        exiting = not signalled or time.monotonic() - sent < 0.015
        seen = (f"{delay:.3f} s", proc.returncode, out, err)
        assert "Traceback" not in err, seen
        if proc.returncode == 0:  # the apply had completed, or the signal came during its commit
            assert read_tree(root, AFTER.keys()) == AFTER, seen
            assert exiting or "interrupted" in out + err, seen
            assert _timed(revert)
        else:
            assert proc.returncode == 130, seen
            lines = [ln for ln in err.splitlines() if ln.strip()]
            assert len(lines) == 1 and lines[0].startswith("patchkit: interrupted"), seen
            assert "wrote: " not in out, seen
            assert snapshot(root) == pristine, seen
        outcomes.append((round(delay, 3), proc.returncode, err.strip()[:60]))
    print(f"{program}: python starts in {python:.3f} s, the apply takes {took:.3f} s;", outcomes)
    # the range reached into the start-up (the tasks not loaded yet); the task's own instants
    # are test_interrupt.py's, at each of its commands
    assert any("while starting" in said for _, _, said in outcomes), outcomes
