"""Timing files for report tests: real ones (the runtime itself, in host mode, one process) and
synthetic ones (FakeRuntime: the same records for the same calls, on a fake clock)."""

from __future__ import annotations

import json
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


# -- the runtime's records without the runtime: a fake clock ------------------------------------------


class FakeRuntime:
    """The runtime's host-mode calls (begin/end, cycle_begin/cycle_end) on a fake clock: what
    ``phase_timer`` would write for the same calls had each ``sleep(s)`` taken exactly ``s``
    seconds and nothing else taken any time. ``write(folder)`` puts the records in a timing
    file as the runtime names it, so a report test reads exactly the times it wrote (the real
    runtime, on a real clock, is tested in tests/timing/ and by host_timing_files)."""

    HOST_T0_NS = 5_000_000_000  # perf_counter_ns at the header
    WALL_T0_NS = 1_700_000_000_000_000_000  # time.time_ns() at the same instant

    def __init__(self, pid: int = 7, step_ns: int = 0):
        self.pid = pid
        self.now = self.HOST_T0_NS
        self.step_ns = step_ns  # what each call itself takes (the runtime's own cost)
        self.records: list[dict] = []
        self._open: list[tuple[str, int]] = []
        self._cycle: dict | None = None
        self._next_cycle = 0

    def sleep(self, seconds: float) -> None:
        self.now += round(seconds * 1e9)

    def wall_ns(self) -> int:
        """``time.time_ns()`` now."""
        return self.WALL_T0_NS + self.now - self.HOST_T0_NS

    def _tick(self) -> int:
        self.now += self.step_ns
        return self.now

    def begin(self, name: str) -> None:
        self._open.append((name, self._tick()))

    def end(self, name: str) -> None:
        opened, t0 = self._open.pop()
        assert opened == name, (opened, name)
        t1 = self._tick()
        self.records.append(
            {
                "kind": "phase",
                "name": name,
                "cycle": self._cycle["cycle"] if self._cycle else None,
                "depth": len(self._open),
                "parent": self._open[-1][0] if self._open else None,
                "t0": t0,
                "t1": t1,
                "host_ns": t1 - t0,
                "dev_ns": None,
                "dev_off_ns": None,
                "graph": False,
                "captured": False,
            }
        )

    def cycle_begin(self, **attrs) -> None:
        self._cycle = {"cycle": self._next_cycle, "t0": self._tick(), "attrs": attrs}
        self._next_cycle += 1

    def cycle_end(self, **attrs) -> None:
        cycle, self._cycle = self._cycle, None
        assert cycle is not None
        t1 = self._tick()
        self.records.append(
            {
                "kind": "cycle",
                "cycle": cycle["cycle"],
                "t0": cycle["t0"],
                "t1": t1,
                "host_ns": t1 - cycle["t0"],
                "dev_ns": None,
                "dev_gap_ns": None,
                "attrs": {**cycle["attrs"], **attrs},
            }
        )

    def write(self, folder: Path, **header_extra) -> Path:
        """The timing file (header, the records, a closing stats record) in ``folder``."""
        folder.mkdir(parents=True, exist_ok=True)
        head = header(pid=self.pid, wall_t0_ns=self.WALL_T0_NS, **header_extra)
        head["clock"] = {**head["clock"], "host_t0_ns": self.HOST_T0_NS}
        stats = {
            "kind": "stats",
            "t": self.now,
            "records": len(self.records),
            **dict.fromkeys(("skipped_capturing", "unmatched_end", "abandoned", "stale_steps"), 0),
            "dropped_pending": 0,
            "writes": 1,
        }
        path = folder / f"phase-timing.rank0.pid{self.pid}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in [head, *self.records, stats]))
        return path
