"""profile.remote against a real sshd on loopback, with stand-in server and benchmark commands.

The targets are installed-layout trees made from the real sglang 0.5.9 wheel; the stand-in
server (tests/support/standin_server.py) imports the timing runtime that the series adds to that tree
and writes timing files for two ranks through it. What is real here: SSH (OpenSSH client and
server), the engine's verify/apply/revert/status, the remote agent's job control (sessions,
process groups, signals, reaping), the /health wait, fetching, the report. What is a stand-in:
sglang.launch_server and sglang.bench_serving.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from patchkit import ops
from patchkit.errors import InvalidInput, PatchkitError
from patchkit.profile.bench_output import parse_bench_output
from patchkit.profile.remote import RemoteConfig, run_remote
from support.cli import interrupt, invoke_with_config, popen_module, wait_for
from support.remote_run import (
    REPO,
    SPEC,
    alive,
    assert_cleaned,
    bench_cmd,
    group_members,
    only_run_dir,
    server_cmd,
    server_pids,
    settings,
    state_of,
    target,  # noqa: F401  (a pytest fixture)
    tree,  # noqa: F401  (a pytest fixture)
)
from support.sshd import free_port
from support.upstream import SERIES_059, sglang_installed, v1_part

pytestmark = [pytest.mark.sshd, pytest.mark.wheels]

PHASES = (
    "draft",
    "draft_preprocess",
    "draft_forward",
    "verify",
    "target_verify",
    "accept",
    "draft_extend_after_decode",
)

# ---- the benchmark output parser ------------------------------------------------------------------

BENCH_SAMPLE = """\
Namespace(backend='sglang', host='127.0.0.1', port=30000, num_prompts=80)
#Input tokens: 20480
100%|██████████| 8/8 [00:01<00:00,  7.10it/s]

================ Serving Benchmark Result ================
Backend:                                 sglang
Successful requests:                     8
Benchmark duration (s):                  1.13
Output token throughput (tok/s):         512.00
Accept length:                           1.50
==================================================
Warm-up done.
100%|██████████| 80/80 [00:09<00:00,  8.41it/s]

================ Serving Benchmark Result ================
Backend:                                 sglang
Traffic request rate:                    inf
Max request concurrency:                 not set
Successful requests:                     80
Benchmark duration (s):                  9.51
Total input tokens:                      20,480
Total generated tokens:                  20480
Request throughput (req/s):              8.41
Input token throughput (tok/s):          2153.52
Output token throughput (tok/s):         2153.52
Peak output token throughput (tok/s):    3301.00
Total token throughput (tok/s):          4307.04
Concurrency:                             12.02
Accept length:                           3.27
--------------End-to-End Latency----------------
Mean E2E Latency (ms):                   1428.77
Median E2E Latency (ms):                 1391.20
---------------Time to First Token----------------
Mean TTFT (ms):                          86.13
P99 TTFT (ms):                           201.55
==================================================
"""


def test_bench_output_takes_the_last_result_block():
    parsed = parse_bench_output(BENCH_SAMPLE)
    assert parsed.result_blocks == 2
    assert parsed.tokens_per_s == 2153.52  # not the warm-up's 512, not the peak 3301
    assert parsed.accept_length == 3.27
    assert parsed.request_throughput == 8.41
    assert parsed.duration_s == 9.51
    assert parsed.completed == 80
    assert parsed.metrics["total input tokens"] == 20480  # thousands separator
    assert parsed.metrics["mean ttft (ms)"] == 86.13
    assert "backend" not in parsed.metrics and "max request concurrency" not in parsed.metrics


@pytest.mark.parametrize(
    "text, tokens, accept",
    [
        ("Output token throughput (tok/s): 100.5\r\nAccept length: 2\n", 100.5, 2.0),
        ("output throughput = 1.2e3 tok/s\naverage accepted length: 4.25\n", 1200.0, 4.25),
        ("Peak output token throughput (tok/s): 9\nTotal token throughput (tok/s): 8\n", None, None),
        ("Traceback (most recent call last):\nRuntimeError: boom\n", None, None),
        ("", None, None),
    ],
)
def test_bench_output_is_tolerant(text, tokens, accept):
    parsed = parse_bench_output(text)
    assert (parsed.tokens_per_s, parsed.accept_length) == (tokens, accept)


# ---- configuration ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change, words",
    [
        ({"colour": "red"}, "unknown setting(s) colour"),
        ({"targets": []}, "no targets"),
        ({"server_command": " "}, "server_command is missing"),
        ({"env": {"BAD-NAME": "1"}}, "not an environment name"),
        ({"env": {"PATCHKIT_TIMER_DIR": "/x"}}, "set by the profile run itself"),
        ({"stop_signals": ["INT", "STOP"]}, "stop_signals ['STOP']"),
        ({"health_timeout_s": 0}, "health_timeout_s 0 must be a positive number"),
        ({"remote_dir": "relative/dir"}, "must be an absolute path"),
        ({"timer": "cuda"}, "timer 'cuda'"),
        ({"port": 70000}, "port 70000"),
    ],
)
def test_bad_settings_are_refused_before_anything_runs(tmp_path, change, words):
    given = settings(tmp_path, ["pk-test:/srv/site"], tmp_path / "none")
    given.update(change)
    with pytest.raises(InvalidInput) as err:
        RemoteConfig.from_mapping(given)
    assert words in err.value.message and err.value.exit_code == 2
    assert not (tmp_path / "out").exists()


def test_bad_target_spec_is_refused_before_a_run_directory_is_made(tmp_path):
    cfg = RemoteConfig.from_mapping(settings(tmp_path, ["ssh://-oProxyCommand=x/srv"], tmp_path))
    with pytest.raises(InvalidInput, match="bad host"):
        run_remote(cfg, stream=open(os.devnull, "w"))
    assert not (tmp_path / "out").exists()


def test_settings_accept_strings_lists_and_extra_env(tmp_path):
    cfg = RemoteConfig.from_mapping(
        settings(
            tmp_path,
            "pk-test:/srv/site",
            tmp_path / "c",
            env="NCCL_PROTO=LL NCCL_ALGO=Ring",
            stop_signals="sigterm",
            bench_command=["python3", "-m", "sglang.bench_serving", "--dataset-name", "random"],
        ),
        extra_env=["NCCL_PROTO=Simple"],
    )
    assert cfg.targets == ["pk-test:/srv/site"]
    assert cfg.env == {"NCCL_PROTO": "Simple", "NCCL_ALGO": "Ring"}
    assert cfg.stop_signals == ["TERM"]
    assert cfg.bench_command == "python3 -m sglang.bench_serving --dataset-name random"


# ---- the flow against loopback sshd ---------------------------------------------------------------

HOSTILE = 'LL\'; touch {canary}; echo "$(touch {canary})" `touch {canary}` $HOME'


def test_remote_profile_run_end_to_end(tmp_path, sshd, tree, target):  # noqa: F811
    canary = tmp_path / "canary"
    remote = tmp_path / "remote 'dir' $HOME"
    cfg = RemoteConfig.from_mapping(
        settings(
            tmp_path,
            [target],
            sshd.client_config,
            remote_dir=str(remote),
            env={"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "PK_HOSTILE": HOSTILE.format(canary=canary)},
            server_command=server_cmd(tmp_path / "server.pids", "--startup-delay 0.6"),
        )
    )
    outcome = run_remote(cfg, stream=open(os.devnull, "w"))
    summary = outcome.summary

    # two ranks, 4 requests x 6 cycles each, every phase once per cycle
    assert sorted(r["rank"] for r in summary.ranks) == [0, 1]
    assert summary.cycle["count"] == 2 * 4 * 6
    for name in PHASES:
        assert summary.phase(name)["count"] == 48, name
    assert summary.phase("draft_forward", parent="draft")["depth"] == 1
    assert 90 < summary.top_level_share <= 100.5
    # the benchmark's own numbers, parsed from its output, and the runtime's agree
    bench_log = (outcome.run_dir / "benchmark.log").read_text()
    assert "Serving Benchmark Result" in bench_log
    assert outcome.bench.accept_length == 3.0
    assert summary.decode["accept_length_mean"] == pytest.approx(3.0)
    assert summary.throughput["tokens_per_s"] == outcome.bench.tokens_per_s > 0
    table = (outcome.run_dir / "table.txt").read_text()
    assert "mean accepted length: 3.00" in table and "NCCL_PROTO=LL NCCL_ALGO=Ring" in table
    assert json.loads((outcome.run_dir / "summary.json").read_text())["cycle"]["count"] == 48
    assert json.loads((outcome.run_dir / "trace.json").read_text())
    assert len(list((outcome.run_dir / "timing").glob("phase-timing.rank*.jsonl"))) == 2
    # the server ran with the runtime's environment, was stopped by SIGINT alone, is gone
    server = outcome.hosts[0]["jobs"]["server"]
    assert server["sent"] == ["INT"] and server["left"] == [] and server["done"]
    assert not group_members(server["pgid"])
    log = (outcome.run_dir / "node0" / "server.log").read_text()
    assert "listening on 127.0.0.1" in log
    # the environment arrived as data: nothing in it ran, the runtime's variables are set
    assert f"env PK_HOSTILE={HOSTILE.format(canary=canary)}\n" in log and not canary.exists()
    run_on_target = outcome.hosts[0]["remote_run_dir"]
    assert run_on_target.startswith(str(remote) + "/")
    assert f"env PATCHKIT_TIMER_DIR={run_on_target}/timing\n" in log
    assert f"env PATCHKIT_TARGET_ROOT={tree}\n" in log and "env PATCHKIT_TIMER_FLUSH_S=1\n" in log
    assert_cleaned(tmp_path, tree, remote=remote)


def test_failing_benchmark_still_stops_and_reverts(tmp_path, sshd, tree, target):  # noqa: F811
    cfg = RemoteConfig.from_mapping(
        settings(tmp_path, [target], sshd.client_config, bench_command=bench_cmd("--fail"))
    )
    with pytest.raises(PatchkitError) as err:
        run_remote(cfg, stream=open(os.devnull, "w"))
    message = err.value.message
    assert "the benchmark failed (exit 1)" in message and "dataset file is missing" in message
    assert err.value.exit_code == 1
    run_dir = only_run_dir(tmp_path)
    assert "RuntimeError" in (run_dir / "benchmark.log").read_text()
    assert not (run_dir / "summary.json").exists()
    assert_cleaned(tmp_path, tree)


def test_server_that_never_becomes_healthy_times_out(tmp_path, sshd, tree, target):  # noqa: F811
    cfg = RemoteConfig.from_mapping(
        settings(
            tmp_path,
            [target],
            sshd.client_config,
            health_timeout_s=1.5,
            server_command=server_cmd(tmp_path / "server.pids", "--never-healthy"),
        )
    )
    start = time.monotonic()
    with pytest.raises(PatchkitError) as err:
        run_remote(cfg, stream=open(os.devnull, "w"))
    assert time.monotonic() - start < 15
    message = err.value.message
    assert f"ssh://{sshd.alias}" in message and f"{cfg.url} with 200 within 1.5 s" in message
    assert "last probe: HTTP 503 Service Unavailable" in message and "listening on 127.0.0.1" in message
    assert_cleaned(tmp_path, tree)


def test_server_that_dies_fails_fast_with_its_log(tmp_path, sshd, tree, target):  # noqa: F811
    cfg = RemoteConfig.from_mapping(
        settings(
            tmp_path,
            [target],
            sshd.client_config,
            health_timeout_s=60,
            server_command=server_cmd(tmp_path / "server.pids", "--never-healthy --exit-after 0.3"),
        )
    )
    start = time.monotonic()
    with pytest.raises(PatchkitError) as err:
        run_remote(cfg, stream=open(os.devnull, "w"))
    assert time.monotonic() - start < 15  # not the 60 s health timeout
    assert "the server exited (exit 3) before" in err.value.message
    assert "simulated crash (CUDA out of memory)" in err.value.message
    assert_cleaned(tmp_path, tree)


def test_server_ignoring_int_and_term_is_killed(tmp_path, sshd, tree, target):  # noqa: F811
    cfg = RemoteConfig.from_mapping(
        settings(
            tmp_path,
            [target],
            sshd.client_config,
            stop_grace_s=0.5,
            timer_flush_s=0.001,
            server_command=server_cmd(tmp_path / "server.pids", "--ignore-signals"),
        )
    )
    outcome = run_remote(cfg, stream=open(os.devnull, "w"))
    server = outcome.hosts[0]["jobs"]["server"]
    assert server["sent"] == ["INT", "TERM", "KILL"] and server["exit"] == -9
    assert not group_members(server["pgid"])
    # rank 1 ended on SIGINT (atexit wrote everything); rank 0 died by SIGKILL and kept
    # only what it had flushed before (at most its last cycles are missing)
    cycles = {r["rank"]: r["cycles"] for r in outcome.summary.ranks}
    assert cycles[1] == 24 and 0 < cycles.get(0, 0) <= 24
    assert_cleaned(tmp_path, tree)


def test_missing_python_on_the_target_is_named_and_reverted(tmp_path, sshd, tree, target):  # noqa: F811
    cfg = RemoteConfig.from_mapping(
        settings(tmp_path, [target], sshd.client_config, python="/nonexistent/python3")
    )
    with pytest.raises(PatchkitError) as err:
        run_remote(cfg, stream=open(os.devnull, "w"))
    assert f"ssh://{sshd.alias}" in err.value.message and "mkrun" in err.value.message
    assert "/nonexistent/python3" in err.value.message
    assert state_of(tree) == "pristine"


def test_applied_target_is_refused_and_left_alone(tmp_path, sshd, tree, target):  # noqa: F811
    opts = ops.Options(layout="installed")
    assert ops.apply(str(SERIES_059), [str(tree)], opts).exit_code == 0
    cfg = RemoteConfig.from_mapping(settings(tmp_path, [target], sshd.client_config))
    with pytest.raises(PatchkitError) as err:
        run_remote(cfg, stream=open(os.devnull, "w"))
    assert "must be pristine" in err.value.message and "applied" in err.value.message
    assert state_of(tree) == "applied"  # not ours: not reverted
    assert not (tmp_path / "server.pids.0").exists()


@pytest.mark.parametrize("to_group", [False, True], ids=["process", "process-group"])
def test_ctrl_c_stops_everything_and_reverts(tmp_path, sshd, tree, target, to_group):  # noqa: F811
    """SIGINT to the profile process, or to its whole group as a terminal's Ctrl-C does
    (then the ssh clients running at that moment are interrupted too)."""
    started = tmp_path / "bench.started"
    given = settings(
        tmp_path,
        [target],
        sshd.client_config,
        bench_command=bench_cmd(f"--requests 100000 --delay 0.02 --started-file {shlex.quote(str(started))}"),
    )
    config = tmp_path / "remote.json"
    config.write_text(json.dumps(given))
    with popen_module("patchkit.profile.remote", "--config", str(config), cwd=tmp_path) as proc:
        assert wait_for(proc, started, 30), proc.communicate(timeout=30)
        err = interrupt(proc, settle=0.3, group=to_group)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    record = json.loads((only_run_dir(tmp_path) / "remote.json").read_text())
    jobs = record["hosts"][0]["jobs"]
    assert jobs["bench"]["sent"] and not group_members(jobs["bench"]["pgid"])
    assert not group_members(jobs["server"]["pgid"])
    assert_cleaned(tmp_path, tree)


def test_two_nodes_apply_serve_fetch_and_revert_together(tmp_path, sshd_factory):
    fleet = sshd_factory(2)
    trees = [sglang_installed("0.5.9", tmp_path / f"node{i}" / "site-packages") for i in range(2)]
    port = free_port(2)
    cfg = RemoteConfig.from_mapping(
        settings(
            tmp_path,
            fleet.targets([str(t) for t in trees]),
            fleet.client_config,
            port=port,
            bench_command=bench_cmd(f"--also-port {port + 1}"),
        )
    )
    outcome = run_remote(cfg, stream=open(os.devnull, "w"))
    assert sorted(r["rank"] for r in outcome.summary.ranks) == [0, 1, 2, 3]
    assert outcome.summary.cycle["count"] == 4 * 24
    for node in ("node0", "node1"):  # each node's files, as fetched
        assert len(list((outcome.run_dir / node / "timing").glob("phase-timing.*.jsonl"))) == 2
    for i, root in enumerate(trees):
        assert state_of(root) == "pristine"
        assert not [p for p in server_pids(tmp_path, i) if alive(p)]


def test_a_local_directory_target_runs_the_same_flow_without_ssh(tmp_path, tree):  # noqa: F811
    cfg = RemoteConfig.from_mapping(settings(tmp_path, [str(tree)], tmp_path / "unused", ssh_config=None))
    outcome = run_remote(cfg, stream=open(os.devnull, "w"))
    assert outcome.summary.cycle["count"] == 48 and outcome.hosts[0]["target"] == str(tree)
    assert_cleaned(tmp_path, tree)


# ---- the invoke task ---------------------------------------------------------------------------


def test_invoke_task_reads_the_profile_remote_block(tmp_path, sshd, tree, target):  # noqa: F811
    given = settings(tmp_path, [target], sshd.client_config)
    del given["env"]
    config = tmp_path / "site.yaml"
    config.write_text(json.dumps({"patchkit": {"profile": {"remote": given}}}))  # JSON is YAML
    proc = invoke_with_config(config, "profile.remote", "--env", "NCCL_ALGO=Tree", timeout=120)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "server environment: NCCL_ALGO=Tree" in proc.stdout
    assert "mean accepted length: 3.00" in proc.stdout
    assert_cleaned(tmp_path, tree)
    bad = invoke_with_config(config, "profile.remote", "--env", "NOT-A-NAME=1", timeout=60)
    assert bad.returncode == 2 and "not an environment name" in bad.stderr


# ---- --baseline: the same server without speculation, unpatched ---------------------------------


def test_baseline_serves_without_speculative_options_on_the_reverted_tree(tmp_path, sshd, tree, target):  # noqa: F811
    cfg = RemoteConfig.from_mapping(settings(tmp_path, [target], sshd.client_config, baseline=True))
    out = tmp_path / "stdout.txt"
    with open(out, "w") as stream:
        outcome = run_remote(cfg, stream=stream)
    base = outcome.summary.baseline
    assert base["error"] is None and base["tokens_per_s"] > 0
    assert base["spec_tokens_per_s"] == outcome.bench.tokens_per_s > 0
    assert base["ratio"] == pytest.approx(base["spec_tokens_per_s"] / base["tokens_per_s"])
    assert base["accept_length"] == 1.0  # a plain server: one token per forward
    # every --speculative-* option and its value dropped, everything else as typed
    assert "--speculative" not in base["server_command"]
    assert base["server_command"] == cfg.server_command.replace(SPEC + " ", "")
    assert base["dropped"] == [
        "--speculative-algorithm EAGLE",
        "--speculative-num-steps 3",
        "--speculative-eagle-topk 1",
    ]
    spec_log = (outcome.run_dir / "node0" / "server.log").read_text()
    base_log = (outcome.run_dir / "baseline" / "node0" / "server.log").read_text()
    assert "timing runtime in the target tree: True" in spec_log and "Spec v2 is enabled" in spec_log
    assert "timing runtime in the target tree: False" in base_log  # series not applied
    assert "speculative options: none" in base_log and "Spec v" not in base_log
    assert "env NCCL_PROTO=LL" in base_log  # same environment
    assert "Serving Benchmark Result" in (outcome.run_dir / "baseline" / "benchmark.log").read_text()
    # the report: summary.json and table.txt, and what the run printed
    summary = json.loads((outcome.run_dir / "summary.json").read_text())
    assert summary["baseline"] == base
    assert summary["throughput"]["baseline_tokens_per_s"] == base["tokens_per_s"]
    assert summary["throughput"]["speedup"] == pytest.approx(base["ratio"])
    line = (
        f"tokens/s with speculation: {base['spec_tokens_per_s']:.1f}, without: "
        f"{base['tokens_per_s']:.1f}, speedup {base['ratio']:.2f}x"
    )
    assert line in (outcome.run_dir / "table.txt").read_text() and line in out.read_text()
    assert summary["meta"]["worker"].startswith("spec v2 (EAGLEWorkerV2")
    assert_cleaned(tmp_path, tree)


def test_baseline_needs_a_speculative_option_to_drop(tmp_path):
    given = settings(
        tmp_path,
        ["pk-test:/srv/site"],
        tmp_path / "none",
        baseline=True,
        server_command=server_cmd(tmp_path / "p", spec=""),
    )
    with pytest.raises(InvalidInput, match="no --speculative-\\* option to drop") as err:
        RemoteConfig.from_mapping(given)
    assert err.value.exit_code == 2


def test_failing_baseline_keeps_the_report_and_says_so(tmp_path, sshd, tree, target):  # noqa: F811
    cfg = RemoteConfig.from_mapping(
        settings(
            tmp_path,
            [target],
            sshd.client_config,
            baseline=True,
            server_command=server_cmd(tmp_path / "server.pids", "--plain-fails"),
        )
    )
    with pytest.raises(PatchkitError) as err:
        run_remote(cfg, stream=open(os.devnull, "w"))
    assert "the baseline run failed" in err.value.message and err.value.exit_code == 1
    assert "plain server refused to start" in err.value.message  # its log's tail
    run_dir = only_run_dir(tmp_path)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["baseline"]["error"] and summary["baseline"]["tokens_per_s"] is None
    assert summary["baseline"]["ratio"] is None and summary["cycle"]["count"] == 48
    assert "baseline (no speculation): failed:" in (run_dir / "table.txt").read_text()
    assert_cleaned(tmp_path, tree)


# ---- no cycle recorded: which worker ran ------------------------------------------------------------


def test_no_cycle_names_the_worker_from_the_server_log(tmp_path, sshd, tree, target):  # noqa: F811
    """SGLang picked the v2 worker (0.5.12's default) and the series times v1 only (0.5.9's
    eagle_worker.py part: the shipped folder times v2 too since 0008-0013); the log is longer
    than the part fetched back, the worker line is found on the target."""
    cfg = RemoteConfig.from_mapping(
        settings(
            tmp_path,
            [target],
            sshd.client_config,
            series=str(v1_part(SERIES_059, tmp_path / "v1")),
            server_command=server_cmd(tmp_path / "server.pids", "--timed-workers v1 --log-noise-kb 1100"),
        )
    )
    with pytest.raises(PatchkitError) as err:
        run_remote(cfg, stream=open(os.devnull, "w"))
    message = err.value.message
    assert "the server ran, but" in message and err.value.exit_code == 1
    assert "Which worker ran: spec v2 (EAGLEWorkerV2, eagle_worker_v2.py)" in message
    assert ('"Spec v2 is enabled by default for eagle/eagle3/standalone speculative decoding."') in message
    assert "Series sglang-v0.5.9 does not time it: it patches eagle_worker.py" in message
    assert "SGLANG_ENABLE_SPEC_V2=0" in message
    saved = (only_run_dir(tmp_path) / "node0" / "server.log").read_text()
    assert "decode batch" in saved and "Spec v2" not in saved  # only the tail came back
    record = json.loads((only_run_dir(tmp_path) / "remote.json").read_text())
    assert record["hosts"][0]["worker"] == "spec v2 (EAGLEWorkerV2, eagle_worker_v2.py)"
    assert_cleaned(tmp_path, tree)


def test_v1_chosen_by_environment_is_timed(tmp_path, sshd, tree, target):  # noqa: F811
    """The same series and server with SGLANG_ENABLE_SPEC_V2=0: SGLang runs v1, which it times."""
    cfg = RemoteConfig.from_mapping(
        settings(
            tmp_path,
            [target],
            sshd.client_config,
            env={"SGLANG_ENABLE_SPEC_V2": "0"},
            server_command=server_cmd(tmp_path / "server.pids", "--timed-workers v1"),
        )
    )
    outcome = run_remote(cfg, stream=open(os.devnull, "w"))
    assert outcome.summary.cycle["count"] == 48
    assert outcome.summary.meta["worker"] == "spec v1 (EAGLEWorker, eagle_worker.py)"
    assert_cleaned(tmp_path, tree)


def _logged_literals(version: str) -> list[str]:
    """The string literals of server_args.py in the real sglang wheel that name spec v1/v2."""
    import ast

    from support.upstream import sglang_files

    text = sglang_files(version, ["sglang/srt/server_args.py"])["sglang/srt/server_args.py"]
    out = []
    for node in ast.walk(ast.parse(text.decode())):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and ("Spec v" in node.value or "spec v2 is off" in node.value)
        ):
            out.append(node.value)
    return out


@pytest.mark.parametrize(
    "version, v2_line, v1_line",
    [
        (
            "0.5.9",
            "Spec v2 is enabled for eagle/eagle3 speculative decoding and overlap schedule is turned on.",
            "Overlap scheduler is disabled when spec v2 is off or using unsupported speculative algorithm. ",
        ),
        (
            "0.5.12",
            "Spec v2 is enabled by default for eagle/eagle3/standalone speculative decoding.",
            "Spec v1 is used for eagle/eagle3/standalone speculative decoding because %s.",
        ),
    ],
)
def test_worker_lines_are_the_ones_sglang_logs(version, v2_line, v1_line):
    from patchkit.profile.remote.worker_log import which_worker

    literals = _logged_literals(version)
    assert v2_line in literals and any(lit.startswith(v1_line) for lit in literals), literals
    log = "[2026-12-01 10:00:00] WARNING server_args.py:3770: {}\nloading weights...\n"
    v2 = which_worker(log.format(v2_line))
    assert (v2.worker, v2.file) == ("v2", "eagle_worker_v2.py") and v2.line == v2_line
    v1 = which_worker(log.format(v1_line.replace("%s", "SGLANG_ENABLE_SPEC_V2=False")))
    assert (v1.worker, v1.file) == ("v1", "eagle_worker.py")
    assert which_worker(log.format("Max running requests is reset to 48")).describe() == "unknown"
    multi = which_worker(log.format("Spec v2 is enabled for multi-layer EAGLE speculative decoding."))
    assert multi.worker == "multi-layer v2" and multi.file is None


def test_a_release_without_the_v1_worker_names_v2_though_its_log_is_silent():
    # a real 0.5.17 server (H100, 2026-12-06) logged no "Spec v1/v2" line; its page said
    # "worker unknown" though 0.5.13+ has no other EAGLE worker
    from patchkit.profile.remote.worker_log import timed_files, worker_of

    silent = "[2026-12-06 18:14:37] SPECULATIVE_MOE_RUNNER_BACKEND is not initialized\n"
    files = timed_files(REPO / "patches" / "sglang-v0.5.17")
    assert "eagle_worker_v2.py" in files and "eagle_worker.py" not in files
    guess = worker_of(silent, files)
    assert (guess.worker, guess.file) == ("v2", "eagle_worker_v2.py")
    assert guess.describe().startswith("spec v2 (EAGLEWorkerV2")
    # a series that times both workers still needs the log to say which ran
    both = timed_files(REPO / "patches" / "sglang-v0.5.12")
    assert worker_of(silent, both).describe() == "unknown"
    said = worker_of("Spec v1 is used for eagle because x.\n", both)
    assert said.worker == "v1"
    # the message for a run that recorded nothing says the same
    from patchkit.profile.remote.worker_log import no_cycles_message

    spec = "python -m sglang.launch_server --speculative-algorithm EAGLE"
    msg = no_cycles_message("no cycle", [("node0 log", silent)], REPO / "patches" / "sglang-v0.5.17", spec)
    assert "spec v2 (EAGLEWorkerV2, eagle_worker_v2.py)" in msg
    assert "Series sglang-v0.5.17 times it (eagle_worker_v2.py)" in msg


def test_no_cycle_message_for_each_case(tmp_path):
    from patchkit.profile.remote.worker_log import no_cycles_message

    v2 = (
        "node0 log",
        "... Spec v2 is enabled by default for eagle/eagle3/standalone speculative decoding.\n",
    )
    spec = "python -m sglang.launch_server --speculative-algorithm EAGLE"
    both = REPO / "patches" / "sglang-v0.5.12"
    said = no_cycles_message("no cycle", [v2], both, spec)
    assert "Series sglang-v0.5.12 times it (eagle_worker_v2.py)" in said and "PYTHONPATH" in said
    said = no_cycles_message("no cycle", [v2], SERIES_059, spec)  # 0008-0013 time v2
    assert "Series sglang-v0.5.9 times it (eagle_worker_v2.py)" in said
    said = no_cycles_message("no cycle", [v2], v1_part(SERIES_059, tmp_path), spec)
    assert "does not time it: it patches eagle_worker.py" in said
    said = no_cycles_message("no cycle", [("node0 log", "nothing useful\n")], SERIES_059, spec)
    assert "Which worker ran: unknown (no 'Spec v1'/'Spec v2' line in node0 log)" in said
    assert "PYTHONPATH" in said
    said = no_cycles_message(
        "no cycle", [("node0 log", "")], SERIES_059, "python -m sglang.launch_server --model M"
    )
    assert "has no --speculative-algorithm" in said


# ---- the warm-up pass and the measured window ------------------------------------------------------


def test_warmup_runs_before_the_measured_benchmark_and_window_json_is_fetched(tmp_path, sshd, tree, target):  # noqa: F811
    """warmup on (the default): the benchmark runs twice on the same server; window.json,
    written by the agent on the target from the jobs' wall-clock times, comes back with the
    timing files and separates the warm-up's cycles from the measured pass's."""
    from patchkit.report import load_timing_dir
    from patchkit.report.window import read_window

    given = settings(tmp_path, [target], sshd.client_config)
    del given["warmup"]
    cfg = RemoteConfig.from_mapping(given)
    assert cfg.warmup is True
    outcome = run_remote(cfg, stream=open(os.devnull, "w"))
    run_dir = outcome.run_dir
    assert "Serving Benchmark Result" in (run_dir / "warmup.log").read_text()
    assert "Serving Benchmark Result" in (run_dir / "benchmark.log").read_text()
    log = (run_dir / "node0" / "server.log").read_text()
    assert log.count('"POST /generate') == 2 * 4  # warm-up + measured, one server
    jobs = outcome.hosts[0]["jobs"]
    assert set(jobs) == {"server", "warmup", "bench"}
    window = read_window(run_dir / "timing")
    assert window is not None and window.source == "profile.remote"
    assert window.warmup is not None
    ws, we = window.warmup
    assert ws < we <= window.start_unix_ns < window.end_unix_ns
    inside = before = 0
    for proc in load_timing_dir(run_dir / "timing"):
        for cycle in proc.cycles:
            wall = proc.wall_ns(cycle["t0"])
            if window.contains(wall):
                inside += 1
            elif ws <= wall <= we:
                before += 1
    assert inside == before == 2 * 4 * 6  # two ranks, 4 requests x 6 cycles
    assert_cleaned(tmp_path, tree)


def test_failing_warmup_stops_and_reverts(tmp_path, sshd, tree, target):  # noqa: F811
    cfg = RemoteConfig.from_mapping(
        settings(tmp_path, [target], sshd.client_config, bench_command=bench_cmd("--fail"), warmup=True)
    )
    with pytest.raises(PatchkitError) as err:
        run_remote(cfg, stream=open(os.devnull, "w"))
    assert "the warm-up benchmark failed (exit 1)" in err.value.message
    run_dir = only_run_dir(tmp_path)
    assert "RuntimeError" in (run_dir / "warmup.log").read_text()
    assert not (run_dir / "benchmark.log").exists()
    assert_cleaned(tmp_path, tree)


def test_window_json_is_the_report_modules_format():
    """The agent writes window.json by hand (it runs on the target without patchkit); what it
    writes must read back through patchkit.report.window and equal what write_window writes."""
    import tempfile

    from patchkit.report.window import read_window, write_window

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp)
        for name, (a, b) in (("warmup", (10, 20)), ("bench", (30, 45))):
            (run / f"{name}.start_ns").write_text(f"{a}\n")
            (run / f"{name}.end_ns").write_text(f"{b}\n")
        out = subprocess.run(
            [
                sys.executable,
                str(REPO / "patchkit/profile/remote/agent.py"),
                "window",
                str(run),
                "bench",
                "warmup",
                "profile.remote",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        written = json.loads((run / "timing" / "window.json").read_text())
        assert json.loads(out.stdout) == written
        assert read_window(run / "timing").warmup == (10, 20)
        write_window(run / "ref", 30, 45, warmup=(10, 20), source="profile.remote")
        assert json.loads((run / "ref" / "window.json").read_text()) == written
        bad = subprocess.run(
            [
                sys.executable,
                str(REPO / "patchkit/profile/remote/agent.py"),
                "window",
                str(run),
                "nojob",
                "",
                "x",
            ],
            capture_output=True,
            text=True,
        )
        assert bad.returncode == 3 and "no recorded start and end" in bad.stderr
