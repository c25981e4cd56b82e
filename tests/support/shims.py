"""Fault tests that stop a run at its Nth external command: shims on the target's PATH count
the commands, and the run is started in a process group of its own whose id a shim can read."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_invoke_in_group(args: list[str], pgid_file: Path, env=None, text: bool = False):
    """``python -m invoke ARGS`` in a new session, its process-group id written to ``pgid_file``
    first (a shim signals the whole group with it); waits at most 120 s. (proc, out, err)."""
    line = (
        f"echo $$ > {shlex.quote(str(pgid_file))}; exec {shlex.quote(sys.executable)} -m invoke "
        + shlex.join(args)
    )
    proc = subprocess.Popen(
        ["sh", "-c", line],
        cwd=REPO,
        env=env,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=text,
    )
    out, err = proc.communicate(timeout=120)
    return proc, out, err


def spread_instants(total: int, count: int) -> list[int]:
    """``count`` instants across a run of ``total`` commands, the first and the last included."""
    return sorted({1, total} | {1 + (total - 1) * k // (count - 1) for k in range(1, count - 1)})
