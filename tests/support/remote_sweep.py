"""profile.remote sweeps in tests (--matrix, --repeat, --blocks): what a real sh makes of a
server command, the stand-in commands of a point with a set throughput, or of a block per
local target on a port of its own, a sweep's controller run as a process of its own (to be killed
mid-sweep and resumed), and what a sweep left (sweep.json, servers still alive)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

from support.cli import popen_module
from support.remote_run import PY, SPEC, ST, alive, bench_cmd, server_cmd
from support.upstream import sglang_installed


def argv_of(command: str, env: dict | None = None) -> list[str]:
    """What a real sh passes to the program: the command run with printf as the program."""
    out = subprocess.run(
        ["sh", "-c", command], capture_output=True, text=True, check=True, env=dict(os.environ, **(env or {}))
    )
    return out.stdout.split("\0")[:-1]


def set_rate(tmp_path: Path, rate: float, noise: float = 0.02, server_extra: str = "") -> dict:
    """The commands of a point served at ``rate`` tok/s (every start appends itself to
    ``tmp_path/order``), its benchmark reporting it times exp(N(0, noise)) seeded from a counter file,
    one request a pass: settings over support.remote_run.settings. ``server_extra``: more of the
    stand-in server's options."""
    return dict(
        server_command=server_cmd(
            tmp_path / "server.pids", f"--tok-s {rate:g} --order-file {tmp_path / 'order'} {server_extra}"
        ),
        bench_command=bench_cmd(f"--noise {noise:g} --seed-file {tmp_path / 'seed'}").replace(
            "--requests 4", "--requests 1"
        ),
    )


def sweep_doc(outcome) -> dict:
    """The sweep.json a sweep wrote."""
    return json.loads((outcome.run_dir / "sweep.json").read_text())


def quiet():
    """A stream for a sweep's progress that nobody reads."""
    return open(os.devnull, "w")


def host_commands(tmp_path: Path, base: int, extra: str = "") -> dict:
    """Literal --port BASE in both commands (rewritten per block); a pid file and a seed counter
    per block's port (two targets' servers and benchmarks run at once on this machine)."""
    pids = shlex.quote(str(tmp_path / "server.pids.port"))
    seed = shlex.quote(str(tmp_path / "seed"))
    return dict(
        port=base,
        server_command=(
            f'PYTHONPATH="$PATCHKIT_TARGET_ROOT" exec {PY} {ST} serve --port {base} {SPEC} '
            f'--pid-file {pids}"$PATCHKIT_SERVER_PORT" --tok-s 1000 --startup-delay 0.5 {extra}'
        ),
        bench_command=(
            f"{PY} {ST} bench --port {base} --requests 1 --cycles 6 --noise 0.02 "
            f'--seed-file {seed}."$PATCHKIT_SERVER_PORT"'
        ),
    )


def two_trees(tmp_path: Path) -> tuple[Path, Path]:
    """Two installed sglang 0.5.9 trees, two hosts' in a --blocks hosts sweep (the wheel: mark
    the test ``wheels``)."""
    return (
        sglang_installed("0.5.9", tmp_path / "host-a" / "site-packages"),
        sglang_installed("0.5.9", tmp_path / "host-b" / "site-packages"),
    )


def alive_port_pids(tmp_path: Path, port: int) -> list[int]:
    """The stand-in servers of host_commands' block on ``port`` still running."""
    return [int(p) for p in (tmp_path / f"server.pids.port{port}").read_text().split() if alive(int(p))]


def controller(config: Path, pid_file: Path, *more: str, timeout: float = 300) -> tuple[int, str, str]:
    """``python -m patchkit.profile.remote --config CONFIG MORE...`` in the config's folder as a
    process of its own, its pid in ``pid_file`` (for a stand-in server's --kill-pid-file) until
    it ends: (exit status, -N for a signal N; stdout; stderr)."""
    with popen_module("patchkit.profile.remote", "--config", str(config), *more, cwd=config.parent) as proc:
        pid_file.write_text(f"{proc.pid}\n")
        out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def started_alive(order_file: Path) -> list[int]:
    """The stand-in servers that set_rate's order file lists and that still run."""
    pids = [int(line.split()[1]) for line in order_file.read_text().splitlines() if line.strip()]
    return [p for p in pids if alive(p)]
