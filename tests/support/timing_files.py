"""Real timing files for report tests: the runtime itself, in host mode, one process."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path


def workload(site, cycles: int = 6, batch_size: int = 1, accepted=(2,), rank: int = 0) -> str:
    """A Python program that calls the runtime (imported from ``site``) as an instrumented
    loop does: ``cycles`` decode cycles of a draft and a verify phase (verify 0.5 ms longer
    per ``rank``), each ending with the requests' accepted drafts."""
    return f"""
import sys, time
sys.path.insert(0, {str(site)!r})
import phase_timer as _pt
for i in range({cycles}):
    _pt.cycle_begin(batch_size={batch_size})
    _pt.begin("draft")
    time.sleep(0.0005)
    _pt.end("draft")
    _pt.begin("verify")
    time.sleep({0.001 + 0.0005 * rank!r})
    _pt.end("verify")
    _pt.cycle_end(accepted={list(accepted)!r})
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
    """Copy the runtime into ``base``, run workload() through it (PATCHKIT_TIMER=host) and
    return the folder of timing files it wrote (``base/timing``)."""
    from patchkit.timing import RUNTIME_PATH

    shutil.copyfile(RUNTIME_PATH, base / "phase_timer.py")
    env = {"PATCHKIT_TIMER_DIR": str(base / "timing"), "PATCHKIT_TIMER": "host", "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-c", workload(base)], env=env, check=True, timeout=60)
    return base / "timing"
