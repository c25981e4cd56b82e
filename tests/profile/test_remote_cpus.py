"""profile.remote --cpus: the server pinned to CPUs (PATCHKIT_CPUS, set by the job-control agent
before the server's command runs), one list for every server or one per block of a sweep."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from patchkit.errors import InvalidInput
from patchkit.profile.remote import RemoteConfig
from patchkit.profile.remote.blocks import make_blocks
from patchkit.profile.remote.config import parse_cpus
from support.remote_run import agent, settings, tree  # noqa: F401


def run_job(tmp_path: Path, env: dict, name: str = "run") -> str:
    """A job started by the agent that prints the CPUs it may run on; its log."""
    run = tmp_path / name
    run.mkdir()
    cmd = "grep Cpus_allowed_list /proc/self/status"
    started = agent("start", str(run), "job", str(tmp_path), json.dumps(env), cmd)
    assert started.returncode == 0, started.stderr
    for _ in range(200):  # bounded: 10 s at most
        state = json.loads(agent("poll", str(run), "job", "", "1", "4096").stdout)
        if state.get("exit") is not None:
            return state["tail"]
        time.sleep(0.05)
    raise AssertionError("the job did not end")


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to tell a pin apart")
def test_the_agent_pins_the_job_to_the_cpus_given(tmp_path):
    mine = sorted(os.sched_getaffinity(0))
    log = run_job(tmp_path, {"PATCHKIT_CPUS": str(mine[-1])})
    assert f"Cpus_allowed_list:\t{mine[-1]}\n" in log
    free = run_job(tmp_path, {}, "free")
    assert f"Cpus_allowed_list:\t{mine[-1]}\n" not in free  # no PATCHKIT_CPUS: not pinned


def test_a_cpu_the_machine_lacks_is_the_jobs_start_error(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    env = json.dumps({"PATCHKIT_CPUS": "4090"})
    started = agent("start", str(run), "job", str(tmp_path), env, "true")
    assert started.returncode != 0 and "OSError" in (started.stdout + started.stderr)


@pytest.mark.parametrize(
    "given, lists",
    [
        ("0-15", ["0-15"]),
        ("0-15;16-31", ["0-15", "16-31"]),
        (" 0, 2,4-7 ", ["0,2,4-7"]),
        (["1", "2"], ["1", "2"]),
    ],
)
def test_cpu_lists_parse(given, lists):
    assert parse_cpus(given) == lists


@pytest.mark.parametrize("bad", ["", "a", "0-", "7-3", "0;;1", "1.5", "-1"])
def test_bad_cpu_lists_are_refused(bad):
    with pytest.raises(InvalidInput, match="a CPU list such as 0-15"):
        parse_cpus(bad)


def test_one_list_per_block_and_their_count_is_checked(tmp_path):
    """--gpus 0,1 --cpus '0;1': each GPU's server gets its own list; three lists for two
    blocks, or PATCHKIT_CPUS also in --env, is refused before any target is touched."""
    from patchkit.transport import parse_target

    given = settings(tmp_path, ["/srv/a"], tmp_path / "unused", ssh_config=None, port=31000)
    cfg = RemoteConfig.from_mapping(dict(given, matrix="env:PK=a,b", gpus="0,1", cpus="0;1"))
    blocks = make_blocks(cfg, [parse_target("/srv/a")])
    assert [b.env({"A": "1"}) for b in blocks] == [
        {"A": "1", "PATCHKIT_CPUS": "0", "CUDA_VISIBLE_DEVICES": "0"},
        {"A": "1", "PATCHKIT_CPUS": "1", "CUDA_VISIBLE_DEVICES": "1"},
    ]
    cfg = RemoteConfig.from_mapping(dict(given, matrix="env:PK=a,b", gpus="0,1", cpus="0;1;0"))
    with pytest.raises(InvalidInput, match="3 CPU lists for 2 block"):
        make_blocks(cfg, [parse_target("/srv/a")])
    with pytest.raises(InvalidInput, match="env names it too"):
        RemoteConfig.from_mapping(dict(given, cpus="0", env={"PATCHKIT_CPUS": "1"}))


@pytest.mark.wheels
def test_a_single_list_pins_the_server_of_a_plain_run(tmp_path, tree):  # noqa: F811
    """profile.remote --cpus N on a run without a sweep: the server's environment carries
    PATCHKIT_CPUS and the agent pins it (the stand-in server's log shows its env)."""
    from patchkit.profile.remote import run_remote

    cpu = str(sorted(os.sched_getaffinity(0))[-1])
    given = settings(tmp_path, [str(tree)], tmp_path / "unused", ssh_config=None)
    cfg = RemoteConfig.from_mapping(dict(given, cpus=cpu))
    outcome = run_remote(cfg, stream=open(os.devnull, "w"))
    log = (outcome.run_dir / "node0" / "server.log").read_text()
    assert f"env PATCHKIT_CPUS={cpu}\n" in log
