"""A server-like run on the fake clock (support.timing_files.FakeRuntime): decode cycles of an
EAGLE-like worker at batch sizes that rise and fall, prefill cycles between them, a stall
(a kernel compiled at a batch size first seen), acceptance per request, a warm-up pass before
the measured window. What report.html's tests and its size bench read; the real runtime and
real servers are the browser tests' (tests/profile/test_report_pages.py)."""

from __future__ import annotations

import random
from pathlib import Path

from patchkit.report.window import write_window
from support.timing_files import FakeRuntime

ARGV = ["sglang.launch_server", "--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3",
        "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]  # fmt: skip


def server_run(
    folder: Path, cycles: int = 400, warmup: int = 40, seed: int = 7, batch_sizes: int = 8
) -> Path:
    """Timing files (one rank) and window.json in ``folder``; returns it."""
    rng = random.Random(seed)
    pt = FakeRuntime(step_ns=500)
    warm_start = pt.wall_ns()
    measured_start = None
    for i in range(warmup + cycles):
        if i == warmup:
            warm_end = pt.wall_ns()
            pt.sleep(0.05)
            measured_start = pt.wall_ns()
        batch = 1 + (i // 25) % batch_sizes
        if i % 40 == 0:  # a new request: its prefill
            pt.cycle_begin(kind="prefill", batch_size=1)
            pt.begin("prefill_forward")
            pt.sleep(0.004)
            pt.end("prefill_forward")
            pt.cycle_end()
        accepted = [min(3, int(rng.expovariate(0.6))) for _ in range(batch)]
        pt.cycle_begin(kind="decode", batch_size=batch)
        pt.begin("draft")
        pt.begin("draft_forward")
        pt.sleep(0.0006 + 0.00005 * batch)
        pt.end("draft_forward")
        pt.end("draft")
        pt.begin("verify")
        pt.begin("target_verify")
        pt.sleep(0.0011 + 0.0001 * batch + (0.06 if i == warmup + cycles // 2 else 0))  # one stall
        pt.end("target_verify")
        pt.end("verify")
        pt.begin("draft_extend_after_decode")
        pt.sleep(0.0003)
        pt.end("draft_extend_after_decode")
        pt.sleep(0.0001)  # scheduling between phases: the cycle's untimed part
        pt.cycle_end(accepted=sum(accepted), accepted_per_req=accepted)
    measured_end = pt.wall_ns()
    pt.write(folder, argv=ARGV)
    write_window(folder, measured_start, measured_end, source="tests", warmup=(warm_start, warm_end))
    return folder
