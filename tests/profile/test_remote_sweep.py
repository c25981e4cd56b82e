"""profile.remote --matrix / --baseline: the server command rewriting (unit, checked by a real sh),
the matrix, and the sweep through the real loopback sshd with the stand-in server and benchmark
(tests/support/standin_server.py): one server per point, env: keys, a failing point, revert always
(also on SIGINT and SIGTERM to a real process mid-sweep), the sweep table, the baseline ratio."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from patchkit.errors import InvalidInput, PatchkitError
from patchkit.profile.remote import RemoteConfig
from patchkit.profile.remote.server_args import (
    drop_speculative,
    expand_server_matrix,
    parse_server_matrix,
    set_option,
    split_words,
)
from patchkit.profile.remote.sweep import render_sweep, run_remote_sweep
from support.cli import interrupt, invoke_with_config, popen_module, wait_for
from support.remote_run import (
    assert_cleaned,
    bench_cmd,
    group_members,
    only_run_dir,
    settings,
    state_of,
)
from support.remote_sweep import argv_of, set_rate
from support.upstream import sglang_installed

pytestmark = [pytest.mark.sshd, pytest.mark.wheels]


P = "printf '%s\\0'"  # the "server": prints each argument, NUL-terminated


# ---- rewriting a server command ---------------------------------------------------------------


@pytest.mark.parametrize(
    "command, kept",
    [
        (f"{P} --model M --speculative-num-steps 3 --port 1", ["--model", "M", "--port", "1"]),
        (f"{P} --speculative-algorithm=EAGLE --tp 8", ["--tp", "8"]),
        (f'{P} --speculative-draft-model-path "$D" --x "$(echo a b)"', ["--x", "a b"]),
        (f"{P} --speculative-adaptive --speculative-num-steps 2 -v", ["-v"]),
        (f"{P} --a 'q r' --speculative-eagle-topk 1 \\\n  --b \"s t\"", ["--a", "q r", "--b", "s t"]),
        (f"{P} --speculative-num-draft-tokens 4 --z # a comment", ["--z"]),
        (f'X=1; {P} --speculative-num-steps 3 --k "$X"', ["--k", "1"]),
    ],
)
def test_drop_speculative_keeps_every_other_word_as_sh_sees_it(command, kept):
    dropped, removed = drop_speculative(command)
    assert removed and "--speculative" not in dropped
    assert argv_of(dropped, {"D": "/d"}) == kept
    full = argv_of(command, {"D": "/d"})
    assert [a for a in full if a in kept] == kept  # nothing else moved or changed


@pytest.mark.parametrize(
    "command, name, value, expected",
    [
        (
            f"{P} --speculative-num-steps 3 --p 1",
            "speculative-num-steps",
            "5",
            ["--speculative-num-steps", "5", "--p", "1"],
        ),
        (f"{P} --speculative-num-steps=3", "speculative-num-steps", "2", ["--speculative-num-steps=2"]),
        (f"{P} --p 1", "--mem-fraction-static", "0.5", ["--p", "1", "--mem-fraction-static", "0.5"]),
        (f"{P} --p 1 ; echo", "speculative-num-steps", "2", ["--p", "1", "--speculative-num-steps", "2"]),
        (
            f"{P} --p 1  # note",
            "x",
            "a b; touch /tmp/pk-nope",
            ["--p", "1", "--x", "a b; touch /tmp/pk-nope"],
        ),
        (f"{P} --flag --q 1", "flag", "on", ["--flag", "on", "--q", "1"]),
    ],
)
def test_set_option_replaces_or_adds(command, name, value, expected):
    rewritten = set_option(command, name, value)
    got = argv_of(rewritten)
    assert got[: len(expected)] == expected, rewritten
    assert not Path("/tmp/pk-nope").exists()


def test_split_words_spans_and_values():
    cmd = 'A="$HOME" exec py --x "a b" \'c\'d 2>&1 | tee log'
    words = split_words(cmd)
    assert [w.text for w in words] == [
        'A="$HOME"',
        "exec",
        "py",
        "--x",
        '"a b"',
        "'c'd",
        "2>&1",
        "|",
        "tee",
        "log",
    ]
    assert words[0].value is None and words[4].value == "a b" and words[5].value == "cd"
    assert words[7].is_control and all(cmd[w.start : w.end] == w.text for w in words)


@pytest.mark.parametrize("bad", ["p 'unterminated", 'p "x', "p $(echo", "p `x"])
def test_unbalanced_commands_are_invalid_input(bad):
    with pytest.raises(InvalidInput):
        drop_speculative(bad)


# ---- the matrix -------------------------------------------------------------------------------


def test_matrix_expands_to_one_command_and_environment_per_point():
    matrix = parse_server_matrix(
        "speculative-num-steps=1,2,3;speculative-num-draft-tokens=2,4;env:NCCL_PROTO=LL,Simple"
    )
    assert matrix == {
        "speculative-num-steps": ["1", "2", "3"],
        "speculative-num-draft-tokens": ["2", "4"],
        "env:NCCL_PROTO": ["LL", "Simple"],
    }
    points = expand_server_matrix(matrix, f"{P} --speculative-num-steps 3 --tp 8", {"NCCL_ALGO": "Ring"})
    assert len(points) == 12
    first, last = points[0], points[-1]
    assert first["label"] == "num-steps=1 num-draft-tokens=2 NCCL_PROTO=LL"
    assert argv_of(first["server_command"]) == [
        "--speculative-num-steps",
        "1",
        "--tp",
        "8",
        "--speculative-num-draft-tokens",
        "2",
    ]
    assert first["env"] == {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL"}
    assert last["env"]["NCCL_PROTO"] == "Simple" and "--speculative-num-steps 3" in last["server_command"]
    assert len({p["label"] for p in points}) == 12


@pytest.mark.parametrize(
    "bad, words",
    [
        ("", "empty"),
        ("speculative-num-steps", "is not KEY=V1,V2"),
        ("k=", "has no values"),
        ("env:1X=a", "not an environment name"),
        ("env:PATCHKIT_RUN_DIR=a", "set by the profile run"),
        ("a=1;a=2", "given twice"),
        ("b@d=1", "not an option name"),
    ],
)
def test_bad_matrix_is_refused_before_anything_runs(tmp_path, bad, words):
    with pytest.raises(InvalidInput, match=words):
        RemoteConfig.from_mapping(
            settings(tmp_path, ["pk-test:/srv/site"], tmp_path / "n", matrix=bad or " ")
        )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "key, value, words",
    [
        ("repeat", 0, "repeat 0"),
        ("repeat", "many", "repeat 'many'"),
        ("warmup", "maybe", "warmup 'maybe'"),
        ("warmup_command", " ", "warmup_command"),
    ],
)
def test_bad_repeat_and_warmup_settings_are_refused(tmp_path, key, value, words):
    with pytest.raises(InvalidInput, match=words):
        RemoteConfig.from_mapping(settings(tmp_path, ["pk-test:/srv/site"], tmp_path / "n", **{key: value}))
    cfg = RemoteConfig.from_mapping(
        settings(tmp_path, ["pk-test:/srv/site"], tmp_path / "n", warmup="off", repeat="4")
    )
    assert cfg.warmup is False and cfg.repeats == 4


def test_render_marks_the_best_point_and_lists_failures():
    rows = [
        {
            "label": "num-steps=1",
            "ok": True,
            "tokens_per_s": 10.0,
            "ratio_to_baseline": 1.25,
            "accept_length": 2.0,
            "cycles": 8,
            "top_level_share": 97.0,
            "error": None,
            "phase_shares": {"draft": 40.0, "verify": 57.0},
            "basis": "device",
        },
        {
            "label": "num-steps=2",
            "ok": True,
            "tokens_per_s": 12.0,
            "ratio_to_baseline": 1.5,
            "accept_length": 2.5,
            "cycles": 8,
            "top_level_share": 96.0,
            "error": None,
            "phase_shares": {"draft": 45.0, "verify": 51.0},
            "basis": "device",
        },
        {
            "label": "num-steps=0",
            "ok": False,
            "tokens_per_s": None,
            "ratio_to_baseline": None,
            "accept_length": None,
            "cycles": None,
            "top_level_share": None,
            "error": "server exited",
            "phase_shares": {},
            "basis": None,
        },
    ]
    text = render_sweep(rows, {"tokens_per_s": 8.0, "accept_length": 1.0}, rows[1], "head")
    marked = [ln for ln in text.splitlines() if ln.startswith("* ")]
    assert len(marked) == 1 and "num-steps=2" in marked[0] and "1.50x" in marked[0]
    assert "baseline (no speculation)" in text and "best: num-steps=2 -- 12.0 tok/s, 1.50x" in text
    assert "num-steps=0: server exited" in text and "draft %" in text
    md = render_sweep(rows, None, rows[1], "head", markdown=True)
    assert "| **num-steps=2** | **12.0** | **-** | **-** | **1.50x**" in md
    assert "| num-steps=0 | failed |" in md
    # a verdict that is not significant marks nothing and says which points it cannot order
    verdict = {
        "best": None,
        "significant": False,
        "top": "num-steps=2",
        "alpha": 0.05,
        "indistinguishable": ["num-steps=2", "num-steps=1"],
        "p_values": {},
        "note": None,
        "cost": {"server_starts": 6, "runs": 6, "targets": 1, "repeat": 3, "minutes": 2.5},
    }
    rows[1].update(tokens_per_s_ci=[11.0, 13.1], repeats=[11.5, 12.0, 12.5], ratio_ci=[1.3, 1.7])
    text = render_sweep(rows, {"tokens_per_s": 8.0, "accept_length": 1.0}, rows[1], "head", verdict=verdict)
    assert not [ln for ln in text.splitlines() if ln.startswith("* ")]
    assert "top (not a verdict): num-steps=2" in text and "[11.0, 13.1]" in text
    assert "indistinguishable from the top: num-steps=2, num-steps=1" in text
    assert "verdict cost: 6 server start(s)" in text and "2.5 min" in text


# ---- the sweep through sshd -----------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path) -> Path:
    return sglang_installed("0.5.9", tmp_path / "site-packages")


def test_sweep_with_baseline_through_invoke(tmp_path, sshd, tree):
    """3 x 2 points (num-steps 0 makes the server exit: those two points fail and the sweep
    goes on), the baseline, every point its own server with its own options and env."""
    given = settings(
        tmp_path,
        [f"{sshd.alias}:{tree}"],
        sshd.client_config,
        chart=True,
        bench_command=bench_cmd().replace("--requests 4", "--requests 2"),
    )
    config = tmp_path / "site.yaml"
    config.write_text(json.dumps({"patchkit": {"profile": {"remote": given}}}))
    proc = invoke_with_config(
        config,
        "profile.remote",
        "--baseline",
        "--matrix",
        "speculative-num-steps=2,0,3;env:NCCL_PROTO=LL,Simple",
        "--repeat",
        "1",
        "--no-warmup",
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    run_dir = only_run_dir(tmp_path)
    doc = json.loads((run_dir / "sweep.json").read_text())
    assert doc["schema"] == "patchkit.remote-sweep/1" and doc["interrupted"] is False
    assert doc["repeat"] == 1 and doc["warmup"] is False and len(doc["order"]) == 7
    assert doc["matrix"] == {"speculative-num-steps": ["2", "0", "3"], "env:NCCL_PROTO": ["LL", "Simple"]}
    rows = doc["rows"]
    assert [r["label"] for r in rows] == [
        "num-steps=2 NCCL_PROTO=LL",
        "num-steps=2 NCCL_PROTO=Simple",
        "num-steps=0 NCCL_PROTO=LL",
        "num-steps=0 NCCL_PROTO=Simple",
        "num-steps=3 NCCL_PROTO=LL",
        "num-steps=3 NCCL_PROTO=Simple",
    ]
    failed = [r for r in rows if not r["ok"]]
    assert [r["params"]["speculative-num-steps"] for r in failed] == ["0", "0"]
    assert all("speculative_num_steps must be at least 1" in r["error"] for r in failed)
    base = doc["baseline"]
    assert base["error"] is None and base["tokens_per_s"] > 0 and base["accept_length"] == 1.0
    for row in rows:
        log = (run_dir / row["report"] / "node0" / "server.log").read_text()
        steps = row["params"]["speculative-num-steps"]
        assert f"--speculative-num-steps {steps}" in log  # the point's option...
        assert f"env NCCL_PROTO={row['params']['env:NCCL_PROTO']}\n" in log  # ...and env
        assert log.count("--speculative-num-steps") == 1  # replaced, not added
        if not row["ok"]:
            continue
        # accepted drafts follow 3,1,2,... capped at the step count: 2 steps -> 2,1,2
        assert row["accept_length"] == pytest.approx({"2": 8 / 3, "3": 3.0}[steps], abs=0.005)
        assert row["cycles"] == 2 * 2 * 6 and row["worker"].startswith("spec v2")
        assert row["ratio_to_baseline"] == pytest.approx(row["tokens_per_s"] / base["tokens_per_s"])
        assert set(row["phase_shares"]) == {"draft", "verify", "draft_extend_after_decode"}
        assert 90 < row["top_level_share"] <= 100.5
        report = json.loads((run_dir / row["report"] / "summary.json").read_text())
        assert report["meta"]["sweep_point"] == row["label"] and report["cycle"]["count"] == 24
    best = max((r for r in rows if r["ok"]), key=lambda r: r["tokens_per_s"])
    assert doc["best"] == best["label"] and base["spec_tokens_per_s"] == best["tokens_per_s"]
    assert base["ratio"] == pytest.approx(best["tokens_per_s"] / base["tokens_per_s"])
    md = (run_dir / "sweep.md").read_text()
    assert doc["verdict"]["significant"] is False  # one repetition: nothing to test
    assert f"top (not a verdict): {best['label']}" in md and "baseline (no speculation)" in md
    assert (run_dir / "sweep.png").stat().st_size > 1000
    assert "baseline (no speculation)" in proc.stdout and f": {best['label']} --" in proc.stdout
    baseline_log = (run_dir / "baseline" / "node0" / "server.log").read_text()
    assert "timing runtime in the target tree: False" in baseline_log
    assert_cleaned(tmp_path, tree)


def test_every_point_failing_is_refused_after_the_revert(tmp_path, sshd, tree):
    cfg = RemoteConfig.from_mapping(
        settings(
            tmp_path, [f"{sshd.alias}:{tree}"], sshd.client_config, matrix="speculative-num-steps=0", repeat=2
        )
    )
    with pytest.raises(PatchkitError) as err:
        run_remote_sweep(cfg, stream=open(os.devnull, "w"))
    assert "every point of the sweep failed" in err.value.message and err.value.exit_code == 1
    doc = json.loads((only_run_dir(tmp_path) / "sweep.json").read_text())
    assert doc["rows"][0]["error"] and doc["best"] is None
    assert state_of(tree) == "pristine"  # the server exited before writing its pid file
    assert not any((tmp_path / "remote").iterdir())


@pytest.mark.parametrize(
    "sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["SIGINT", "SIGTERM"]
)
def test_signal_mid_sweep_stops_the_server_and_reverts(tmp_path, sshd, tree, sig, code):
    """A real profile process; its second point's server hangs in /generate (PK_HANG): the
    signal arrives while that point's benchmark waits, after the first point completed."""
    hang = tmp_path / "hanging"
    given = settings(
        tmp_path,
        [f"{sshd.alias}:{tree}"],
        sshd.client_config,
        matrix=f"env:PK_HANG=no,{hang},no",
        repeat=1,
        bench_command=bench_cmd().replace("--requests 4", "--requests 2"),
    )
    config = tmp_path / "remote.json"
    config.write_text(json.dumps(given))
    with popen_module("patchkit.profile.remote", "--config", str(config), cwd=tmp_path) as proc:
        assert wait_for(proc, hang, 60), proc.communicate(timeout=30)
        err = interrupt(proc, sig)
    assert proc.returncode == code, err
    run_dir = only_run_dir(tmp_path)
    doc = json.loads((run_dir / "sweep.json").read_text())
    assert doc["interrupted"] is True
    assert [r["ok"] for r in doc["rows"]] == [True, False, False]
    assert doc["rows"][2]["error"] == "not run (interrupted)"
    record = json.loads((run_dir / doc["rows"][1]["report"] / "remote.json").read_text())
    jobs = record["hosts"][0]["jobs"]
    assert jobs["server"]["sent"] and not group_members(jobs["server"]["pgid"])
    assert not group_members(jobs["bench"]["pgid"])
    assert_cleaned(tmp_path, tree)


def test_local_directory_target_sweep_and_baseline(tmp_path, tree):
    """The GPU harness's form: a local directory target, no SSH; the outcome object."""
    cfg = RemoteConfig.from_mapping(
        settings(
            tmp_path,
            [str(tree)],
            tmp_path / "unused",
            ssh_config=None,
            baseline=True,
            matrix={"speculative-num-steps": [1, 3]},
            repeat=1,
            bench_command=bench_cmd().replace("--requests 4", "--requests 2"),
        )
    )
    outcome = run_remote_sweep(cfg, stream=open(os.devnull, "w"))
    assert [r["ok"] for r in outcome.rows] == [True, True]
    one, three = outcome.rows
    assert one["accept_length"] == 2.0 and three["accept_length"] == 3.0  # capped at 1 draft
    assert outcome.best is max(outcome.rows, key=lambda r: r["tokens_per_s"])
    assert outcome.baseline["tokens_per_s"] > 0 and outcome.files["table"] == "sweep.txt"
    assert "chart" not in outcome.files  # chart=False in the settings
    assert_cleaned(tmp_path, tree)


# ---- repeated sweeps and the verdict (stand-in servers with a set throughput) -----------------------
# The stand-in server answers its --tok-s with every request and the stand-in benchmark reports
# it times exp(N(0, 2%)), seeded from a counter file: known throughput distributions, the same
# numbers on every run of the test.


def test_repeated_sweep_30_percent_apart_is_significant_in_rotated_order(tmp_path, sshd, tree):
    """Two points 30% apart and the baseline, 3 repetitions, warm-up on (the default): nine
    server starts in rotated order, each its own server with its own window.json; the faster
    point is named best and both are significantly faster than the baseline."""
    from patchkit.report.window import read_window

    cfg = RemoteConfig.from_mapping(
        settings(
            tmp_path,
            [f"{sshd.alias}:{tree}"],
            sshd.client_config,
            matrix="tok-s=1000,1300",
            baseline=True,
            repeat=3,
            warmup=True,
            chart=True,
            **set_rate(tmp_path, 800),
        )
    )
    outcome = run_remote_sweep(cfg, stream=open(os.devnull, "w"))
    run_dir = outcome.run_dir
    starts = [line.split() for line in (tmp_path / "order").read_text().splitlines()]
    # rep 1: A B base, rep 2: B base A, rep 3: base A B -- one server start each
    assert [r for r, _ in starts] == ["1000", "1300", "800", "1300", "800", "1000", "800", "1000", "1300"]
    assert len({pid for _, pid in starts}) == 9
    doc = json.loads((run_dir / "sweep.json").read_text())
    assert [(o["rep"], o["label"]) for o in doc["order"]] == [
        (1, "tok-s=1000"),
        (1, "tok-s=1300"),
        (1, "baseline"),
        (2, "tok-s=1300"),
        (2, "baseline"),
        (2, "tok-s=1000"),
        (3, "baseline"),
        (3, "tok-s=1000"),
        (3, "tok-s=1300"),
    ]
    verdict = doc["verdict"]
    assert verdict["best"] == "tok-s=1300" and verdict["significant"] is True
    assert verdict["indistinguishable"] == ["tok-s=1300"] and verdict["alpha"] == 0.05
    assert "Welch" in verdict["method"] and verdict["cost"]["server_starts"] == 9
    assert doc["best"] == "tok-s=1300" and doc["repeat"] == 3
    slow, fast = doc["rows"]
    for row, rate in ((slow, 1000), (fast, 1300)):
        assert len(row["repeats"]) == 3 and all(abs(v / rate - 1) < 0.1 for v in row["repeats"])
        lo, hi = row["tokens_per_s_ci"]
        assert lo < row["tokens_per_s_median"] < hi
        assert row["tokens_per_s"] == row["tokens_per_s_median"]
        assert row["reports"] == [row["reports"][0], row["reports"][0] + "/rep2", row["reports"][0] + "/rep3"]
        assert row["report"] in row["reports"]
        pids = set()
        for rep in row["reports"]:
            log = (run_dir / rep / "node0" / "server.log").read_text()
            pids.add(log.split("pid ")[1].split(",")[0])
            window = read_window(run_dir / rep / "timing")
            assert window.warmup[1] <= window.start_unix_ns < window.end_unix_ns
            assert (run_dir / rep / "warmup.log").exists()
        assert len(pids) == 3  # one server per repetition
        ratio_lo, ratio_hi = row["ratio_ci"]
        assert ratio_lo > 1.0 and ratio_lo < row["ratio_to_baseline"] < ratio_hi
    base = doc["baseline"]
    assert len(base["repeats"]) == 3 and base["reports"] == ["baseline", "baseline/rep2", "baseline/rep3"]
    assert base["tokens_per_s_ci"][0] < 800 < base["tokens_per_s_ci"][1] * 1.1
    for rep in base["reports"]:  # the baseline is warmed up too
        assert "Serving Benchmark Result" in (run_dir / rep / "warmup.log").read_text()
    md = (run_dir / "sweep.md").read_text()
    assert "| **tok-s=1300** |" in md and "verdict: best tok-s=1300" in md
    assert "verdict cost: 9 server start(s)" in md and "95% CI" in md
    assert (run_dir / "sweep.png").stat().st_size > 1000
    assert_cleaned(tmp_path, tree)


@pytest.mark.parametrize(
    "matrix, rates",
    [
        ("env:PK_TWIN=1,2,3", None),  # identical points: the control
        ("tok-s=1000,1001", [1000, 1001]),  # 0.1% apart
    ],
    ids=["identical", "0.1%-apart"],
)
def test_points_that_cannot_be_told_apart_get_no_best(tmp_path, tree, matrix, rates):
    cfg = RemoteConfig.from_mapping(
        settings(
            tmp_path,
            [str(tree)],
            tmp_path / "unused",
            ssh_config=None,
            matrix=matrix,
            repeat=3,
            **set_rate(tmp_path, 1000),
        )
    )
    outcome = run_remote_sweep(cfg, stream=open(os.devnull, "w"))
    doc = json.loads((outcome.run_dir / "sweep.json").read_text())
    verdict = doc["verdict"]
    labels = [r["label"] for r in doc["rows"]]
    assert verdict["best"] is None and verdict["significant"] is False
    assert sorted(verdict["indistinguishable"]) == sorted(labels)
    assert all(len(r["repeats"]) == 3 for r in doc["rows"])
    md = (outcome.run_dir / "sweep.md").read_text()
    assert "verdict: no significant best" in md and "**" not in md.split("\n\n", 2)[2]
    assert "top (not a verdict)" in outcome.table
    assert state_of(tree) == "pristine"
