"""Ctrl-C during `invoke profile.remote` (real sshd on loopback, stand-in server and
benchmark as in test_profile_remote.py): servers stopped, targets reverted, exit 130 with
"interrupted; servers stopped, targets reverted", and the timing that exists is fetched into a
report marked partial."""

from __future__ import annotations

import json
import os
import shlex

import pytest

from support.cli import interrupt, popen_module, wait_for
from support.remote_run import (
    REPO,
    assert_cleaned,
    bench_cmd,
    only_run_dir,
    settings,
    target,  # noqa: F401  (a pytest fixture)
    tree,  # noqa: F401  (a pytest fixture)
)


@pytest.mark.parametrize("to_group", [False, True], ids=["process", "process-group"])
def test_ctrl_c_in_invoke_profile_remote(tmp_path, sshd, tree, target, to_group):  # noqa: F811
    started = tmp_path / "bench.started"
    given = settings(
        tmp_path,
        [target],
        sshd.client_config,
        bench_command=bench_cmd(f"--requests 100000 --delay 0.02 --started-file {shlex.quote(str(started))}"),
    )
    config = tmp_path / "site.json"
    config.write_text(json.dumps({"patchkit": {"profile": {"remote": given}}}))
    with popen_module("invoke", "-r", str(REPO), "-f", str(config), "profile.remote", cwd=tmp_path) as proc:
        assert wait_for(proc, started, 60), proc.communicate(timeout=30)
        # the stand-in server has flushed some cycles by then
        out, err = interrupt(proc, settle=1.5, group=to_group, timeout=90, with_stdout=True)
    assert proc.returncode == 130, err
    assert err.rstrip().splitlines()[-1] == "profile: interrupted; servers stopped, targets reverted"
    assert "without an exit status" not in err
    run_dir = only_run_dir(tmp_path)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert "partial" in json.dumps(summary.get("meta", summary))
    assert "partial report:" in out
    assert_cleaned(tmp_path, tree)


def test_cleanup_problems_after_an_interrupt_stay_an_interrupt(tmp_path, monkeypatch):
    """A Ctrl-C that also broke the cleanup (e.g. the ssh clients of the terminal's process group
    died with it) is still an interrupt (130), and it says what was left; it used to become a
    ProfileError (exit 1) naming only the broken ssh call."""
    from patchkit.profile.progress import ProgressLine
    from patchkit.profile.remote import RemoteConfig
    from patchkit.profile.remote.run import RemoteRun
    from patchkit.transport import parse_target

    cfg = RemoteConfig.from_mapping(settings(tmp_path, [str(tmp_path)], tmp_path / "none"))
    run = RemoteRun(
        cfg, tmp_path, ProgressLine(prefix="t", stream=open(os.devnull, "w")), [parse_target(str(tmp_path))]
    )

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "verify_and_apply", interrupted)
    monkeypatch.setattr(
        run,
        "cleanup",
        lambda interrupted=False: ["stopping the jobs: the remote program ended without an exit status"],
    )
    with pytest.raises(KeyboardInterrupt) as info:
        run.execute()
    assert "cleanup incomplete: stopping the jobs" in str(info.value)


@pytest.mark.wheels  # the tree fixture is sglang 0.5.9 installed from its wheel
def test_interrupt_after_the_benchmark_keeps_its_figures_and_no_double_timing(tmp_path, tree, monkeypatch):  # noqa: F811
    """Seen on the H200: the harness's time limit sent SIGINT while profile.remote read the
    timing it had just fetched. The partial report said "interrupted before the benchmark
    finished ... no benchmark figures" although the benchmark had finished, and the fetch the
    cleanup repeated kept both copies of each file (every cycle counted twice)."""
    from patchkit.profile.remote import RemoteConfig, run as run_mod, run_remote

    real = run_mod.count_cycles
    calls = []

    def interrupted_once(timing_dir):
        calls.append(timing_dir)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return real(timing_dir)

    monkeypatch.setattr(run_mod, "count_cycles", interrupted_once)
    cfg = RemoteConfig.from_mapping(settings(tmp_path, [str(tree)], tmp_path / "unused", ssh_config=None))
    with pytest.raises(KeyboardInterrupt):
        run_remote(cfg, stream=open(os.devnull, "w"))
    assert len(calls) == 2  # the interrupted read, then the cleanup's fetch
    run_dir = only_run_dir(tmp_path)
    summary = json.loads((run_dir / "summary.json").read_text())
    partial = summary["meta"]["partial"]
    assert "after the benchmark finished" in partial and "no benchmark figures" not in partial
    assert summary["meta"]["tokens_per_s"] > 0
    assert json.loads((run_dir / "benchmark.json").read_text())["tokens_per_s"] > 0
    assert sorted(p.name for p in (run_dir / "timing").glob("*.jsonl")) == sorted(
        p.name for p in (run_dir / "node0" / "timing").glob("*.jsonl")
    )
    assert summary["cycle"]["count"] == 48  # each cycle once, as in an uninterrupted run
    assert_cleaned(tmp_path, tree)
