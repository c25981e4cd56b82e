"""Real timing files for report tests: the runtime itself, in host mode, one process."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

# six decode cycles of two phases, as an instrumented loop calls the runtime
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


def header(pid: int = 7, wall_t0_ns: int = 1_700_000_000_000_000_000, **extra) -> dict:
    """The header record of one rank-0 process in host mode, for records a test writes by
    hand (``extra``: argv, ab_cycles, sampling, ...)."""
    return {
        "kind": "header",
        "schema": "patchkit.timing/1",
        "mode": "host",
        "rank": 0,
        "pid": pid,
        "host": "h",
        "clock": {"host_t0_ns": 0, "wall_t0_ns": wall_t0_ns},
        **extra,
    }


def host_timing_files(base: Path) -> Path:
    """Copy the runtime into ``base``, run WORKLOAD through it (PATCHKIT_TIMER=host) and
    return the folder of timing files it wrote (``base/timing``)."""
    from patchkit.timing import RUNTIME_PATH

    shutil.copyfile(RUNTIME_PATH, base / "phase_timer.py")
    env = {"PATCHKIT_TIMER_DIR": str(base / "timing"), "PATCHKIT_TIMER": "host", "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-c", WORKLOAD.format(site=str(base))], env=env, check=True, timeout=60)
    return base / "timing"
