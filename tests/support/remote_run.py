"""profile.remote runs in tests: the stand-in server and benchmark commands
(support/standin_server.py), the job-control agent run locally, the settings of a run against them, and the checks after one
(the tree reverted, no server left, no remote run folder). Fixtures, imported by name into the
test modules that use them: ``tree``, an installed sglang 0.5.9 tree (its wheel: mark the test
``wheels``), and ``target``, that tree behind the loopback sshd (``alias:path``)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from patchkit import ops
from support.sshd import free_port
from support.upstream import SERIES_059, sglang_installed

REPO = Path(__file__).resolve().parents[2]
STANDIN = Path(__file__).resolve().parent / "standin_server.py"
PY, ST = shlex.quote(sys.executable), shlex.quote(str(STANDIN))


AGENT = str(REPO / "patchkit/profile/remote/agent.py")


def agent(*args: str) -> subprocess.CompletedProcess:
    """The job-control agent (patchkit/profile/remote/agent.py) run here, as a target runs it."""
    return subprocess.run([sys.executable, AGENT, *args], capture_output=True, text=True)


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def group_members(pgid: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
                pids.append(int(entry))
    return pids


SPEC = "--speculative-algorithm EAGLE --speculative-num-steps 3 --speculative-eagle-topk 1"


def server_cmd(pid_file: Path, extra: str = "", spec: str = SPEC) -> str:
    """The stand-in server; ``spec``: its speculative options (none: a plain server)."""
    return (
        f'PYTHONPATH="$PATCHKIT_TARGET_ROOT" exec {PY} {ST} serve '
        f'--port "$(($PATCHKIT_SERVER_PORT + $PATCHKIT_NODE_RANK))" {spec} '
        f"--pid-file {shlex.quote(str(pid_file))}.$PATCHKIT_NODE_RANK {extra}"
    )


def bench_cmd(extra: str = "") -> str:
    return f'{PY} {ST} bench --port "$PATCHKIT_SERVER_PORT" --requests 4 --cycles 6 {extra}'


def settings(tmp_path: Path, targets: list[str], client_config, **over) -> dict:
    base = dict(
        targets=targets,
        ssh_config=str(client_config),
        python=sys.executable,
        series=str(SERIES_059),
        port=free_port(),
        poll_s=0.1,
        health_timeout_s=15,
        bench_timeout_s=30,
        stop_grace_s=3,
        step_timeout_s=30,
        server_command=server_cmd(tmp_path / "server.pids"),
        bench_command=bench_cmd(),
        env={"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"},
        remote_dir=str(tmp_path / "remote"),
        out=str(tmp_path / "out"),
        chart=False,
        timer_sample=1,  # every cycle timed, counts exact; sampling: test_profile_sample.py
        warmup=False,
    )  # the tests count one benchmark pass; warm-up tests turn it on
    base.update(over)
    return base


def server_pids(tmp_path: Path, node: int = 0) -> list[int]:
    return [int(p) for p in (tmp_path / f"server.pids.{node}").read_text().split()]


def state_of(root: Path) -> str:
    result = ops.status(str(SERIES_059), [str(root)], ops.Options(layout="installed"))
    return result.hosts[0].state


def assert_cleaned(tmp_path: Path, root: Path, nodes: int = 1, remote: Path | None = None) -> None:
    assert state_of(root) == "pristine"
    assert not (root / "sglang/srt/speculative/phase_timer.py").exists()
    for node in range(nodes):
        pids = server_pids(tmp_path, node)
        assert pids and not [p for p in pids if alive(p)], f"node {node}: {pids} still running"
    remote = remote or tmp_path / "remote"
    assert not remote.exists() or not any(remote.iterdir()), "remote run directory left behind"


def only_run_dir(tmp_path: Path) -> Path:
    runs = list((tmp_path / "out").iterdir())
    assert len(runs) == 1
    return runs[0]


@pytest.fixture
def tree(tmp_path) -> Path:
    return sglang_installed("0.5.9", tmp_path / "site-packages")


@pytest.fixture
def target(sshd, tree) -> str:
    return f"{sshd.alias}:{tree}"
