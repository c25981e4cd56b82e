"""The remote profile run: SGLang servers on SSH/docker/exec targets, apply, serve, benchmark, revert.

    from patchkit.profile.remote import RemoteConfig, run_remote, run_remote_sweep

Rooms, each importing only those listed before it:
  server_args  the server command line: --speculative-* options, matrix points, env: keys
  config       RemoteConfig, every setting of profile.remote, checked once
  agent        the job-control program sent to each target as text (never imported here)
  host         RemoteHost: one target's agent calls, log tails, fetches
  worker_log   which speculative worker the server's log names
  run          run_remote: one run (and its --baseline)
  resume       the sweep's state (sweep-state.json), written as it runs, read back by --resume
  sweep        run_remote_sweep: --matrix, one server start per point
  __main__     ``python -m patchkit.profile.remote``: picks run or sweep
"""

from __future__ import annotations

from patchkit.profile.bench_output import parse_bench_output
from patchkit.profile.remote.config import RemoteConfig
from patchkit.profile.remote.run import RemoteOutcome, run_remote
from patchkit.profile.remote.sweep import run_remote_sweep

__all__ = ["RemoteConfig", "RemoteOutcome", "parse_bench_output", "run_remote", "run_remote_sweep"]
