"""profile.remote --resume: a sweep whose controller died (SIGKILL: the process, the connection or
the machine gone) or was interrupted (Ctrl-C) goes on in its folder and reaches the verdict an
uninterrupted sweep reaches on the same runs; a folder without a sweep's state, a finished
sweep and a command of another design are refused (exit 2) before anything is touched.

The sweeps run on local directory targets with the stand-in server and benchmark
(tests/support/standin_server.py): ``--tok-s R`` sets a point's throughput, the benchmark reports
it times exp(N(0, 2 %)) seeded from a counter file that every benchmark advances, so two sweeps
making the same benchmarks in the same order measure the same numbers; ``--kill-at N`` makes
the server of the N-th start kill the sweep's controller as it starts (before its benchmark)
and serve on, orphaned. The uninterrupted sweep is the reference; the resumed one is cut at
the first start of every round after the first and at the third run of round 2.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from patchkit.errors import InvalidInput
from patchkit.profile.progress import ProgressLine
from patchkit.profile.remote import RemoteConfig, resume as resuming
from patchkit.profile.remote.blocks import make_blocks
from patchkit.profile.remote.run import RemoteRun
from patchkit.profile.remote.server_args import expand_server_matrix
from patchkit.profile.remote.sweep import _Rounds, _row, rep_dir, run_remote_sweep
from support.cli import invoke_with_config, module
from support.remote_run import (  # noqa: F401
    agent,
    assert_cleaned,
    group_members,
    only_run_dir,
    settings,
    tree,
)
from support.remote_sweep import controller, quiet, set_rate, started_alive, sweep_doc

RACE = dict(matrix="tok-s=1000,1500,1510", baseline=True, until="decided", repeat=4)


def sweep_settings(folder: Path, site: Path, server_extra: str = "", **design) -> dict:
    """A sweep's settings in a folder of its own (its order, seed counter, spread cache, out)."""
    folder.mkdir(parents=True, exist_ok=True)
    given = settings(
        folder,
        [str(site)],
        folder / "unused",
        ssh_config=None,
        spread_cache=str(folder / "spread.json"),
        **set_rate(folder, 800, server_extra=server_extra),
    )
    given.update(design)
    return given


def outcome(doc: dict) -> dict:
    """What a sweep decided on which runs: the verdict (less the minutes it cost), the drops, the
    stop, each round's points and tok/s, the order, every row's tok/s and the last decision."""
    verdict = dict(doc["verdict"])
    verdict["cost"] = {k: v for k, v in verdict["cost"].items() if k != "minutes"}
    return {
        "verdict": verdict,
        "dropped": doc["dropped"],
        "stopped": doc["stopped"],
        "rounds": [(r["round"], r["points"], r["tokens_per_s"], r.get("dropped")) for r in doc["rounds"]],
        "order": [(o["rep"], o["label"]) for o in doc["order"]],
        "repeats": {r["label"]: r["repeats"] for r in doc["rows"]},
        "baseline": (doc["baseline"] or {}).get("repeats"),
        "decision": doc.get("decision"),
    }


def cut_folder(doc: dict, rnd: int, label: str) -> str:
    """The folder of ``label``'s run in round ``rnd`` (1-based) of a sweep, as sweep.json names it."""
    base = (
        "baseline"
        if label == "baseline"
        else next(r for r in doc["rows"] if r["label"] == label)["reports"][0]
    )
    return rep_dir(base, rnd - 1)


@pytest.mark.slow
@pytest.mark.wheels
def test_a_sweep_killed_at_every_round_boundary_and_mid_run_resumes_to_the_same_verdict(tmp_path, tree):  # noqa: F811
    reference = sweep_doc(
        run_remote_sweep(
            RemoteConfig.from_mapping(sweep_settings(tmp_path / "ref", tree, **RACE)), stream=quiet()
        )
    )
    order = [(o["rep"], o["label"]) for o in reference["order"]]
    firsts = [i for i in range(1, len(order)) if order[i][0] != order[i - 1][0]]
    assert len(firsts) >= 2 and reference["dropped"], "three rounds at least, a point dropped"
    mid = [i for i, (rep, _) in enumerate(order) if rep == 2][2]  # two runs of round 2 kept
    cuts = sorted({*firsts, mid})
    kill_at = ",".join(str(c + 1 + j) for j, c in enumerate(cuts))  # each cut start is one more line
    cut = tmp_path / "cut"
    pid_file = cut / "controller.pid"
    config = cut / "remote.json"
    config.write_text(
        json.dumps(sweep_settings(cut, tree, f"--kill-at {kill_at} --kill-pid-file {pid_file}", **RACE))
    )
    code, _, err = controller(config, pid_file)
    assert code == -signal.SIGKILL, err
    run_dir = only_run_dir(cut)
    for j, c in enumerate(cuts):
        state = json.loads((run_dir / "sweep-state.json").read_text())
        assert state["finished"] is False and [(e["round"], e["label"]) for e in state["in_flight"]] == [
            order[c]
        ]
        assert len(state["order"]) == c + 1  # the runs before the cut, and the cut one
        code, _, err = controller(config, pid_file, "--resume", str(run_dir))
        assert code == (0 if j == len(cuts) - 1 else -signal.SIGKILL), err
        rnd, label = order[c]
        assert f"round {rnd}: {label}: the run cut mid-server is discarded and run again" in err
        assert f"resumed at round {rnd} of at most 4 ({c} starts done)" in err
        assert "stopped what the cut run left on" in err  # the orphaned server, before the next start
        applied = "the cut sweep left its series applied on 1 target(s)" in err
        assert applied == (label != "baseline") and applied != ("1 target(s) pristine" in err)
    doc = json.loads((run_dir / "sweep.json").read_text())
    assert doc["interrupted"] is False
    assert outcome(doc) == outcome(reference)
    for c in cuts:
        assert (run_dir / (cut_folder(doc, *order[c]) + ".cut")).is_dir()
    assert not started_alive(cut / "order")
    assert_cleaned(cut, tree)
    code, _, err = controller(config, pid_file, "--resume", str(run_dir))
    assert code == 2 and "that sweep finished (stopped: max rounds" in err and "nothing to resume" in err


@pytest.mark.slow
@pytest.mark.wheels
def test_a_sweep_interrupted_by_ctrl_c_resumes_in_its_folder(tmp_path, tree):  # noqa: F811
    """A fixed sweep (two points, two repetitions) interrupted at the first start of round 2: it
    cleans up and writes its interrupted sweep.json; resumed, it reruns that start and ends with
    the uninterrupted sweep's verdict in the same folder."""
    design = dict(matrix="tok-s=1000,1300", repeat=2)
    reference = sweep_doc(
        run_remote_sweep(
            RemoteConfig.from_mapping(sweep_settings(tmp_path / "ref", tree, **design)), stream=quiet()
        )
    )
    cut = tmp_path / "cut"
    pid_file, config = cut / "controller.pid", cut / "remote.json"
    extra = f"--kill-at 3 --kill-pid-file {pid_file} --kill-signal INT"
    config.write_text(json.dumps(sweep_settings(cut, tree, extra, **design)))
    code, _, err = controller(config, pid_file)
    assert code == 130, err
    run_dir = only_run_dir(cut)
    assert json.loads((run_dir / "sweep.json").read_text())["interrupted"] is True
    code, _, err = controller(config, pid_file, "--resume", str(run_dir))
    assert code == 0, err
    assert "round 2: tok-s=1300: the run cut mid-server is discarded and run again" in err
    assert "resumed at round 2 of at most 2 (2 starts done)" in err and "1 target(s) pristine" in err
    assert "stopped what the cut run left" not in err  # the interrupted run cleaned up after itself
    doc = json.loads((run_dir / "sweep.json").read_text())
    assert doc["interrupted"] is False and outcome(doc) == outcome(reference)
    assert doc["verdict"]["best"] == "tok-s=1300"
    assert_cleaned(cut, tree)


def _snapshot_of_a_sweep_not_run(cfg: RemoteConfig, folder: Path) -> None:
    """The sweep's own writer, on the rounds of a sweep that has not started a run yet."""
    folder.mkdir()
    points = expand_server_matrix(cfg.matrix, cfg.server_command, cfg.env)
    progress = ProgressLine(stream=quiet())
    rows = [_row(i, p) for i, p in enumerate(points)]
    state = _Rounds(
        cfg,
        points,
        rows,
        make_blocks(cfg, []),
        folder,
        progress,
        time.monotonic(),
        RemoteRun(cfg, folder, progress, []),
    )
    resuming.writer(cfg, points, folder)(state)


def test_resume_refuses_no_state_another_design_and_a_finished_sweep(tmp_path):
    given = settings(tmp_path, [str(tmp_path / "site")], tmp_path / "unused", ssh_config=None)
    given.update(matrix="tok-s=1,2", repeat=2)
    cfg = RemoteConfig.from_mapping(given)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InvalidInput, match=r"no sweep-state\.json there: not the folder of a sweep") as err:
        run_remote_sweep(cfg, stream=quiet(), resume=empty)
    assert err.value.exit_code == 2
    folder = tmp_path / "sweep"
    _snapshot_of_a_sweep_not_run(cfg, folder)
    other = RemoteConfig.from_mapping(dict(given, matrix="tok-s=1,3", targets=[str(tmp_path / "elsewhere")]))
    with pytest.raises(InvalidInput) as err:
        run_remote_sweep(other, stream=quiet(), resume=folder)
    message = err.value.message
    assert 'matrix: the sweep\'s {"tok-s": ["1", "2"]}, this command\'s {"tok-s": ["1", "3"]}' in message
    assert "targets: the sweep's" in message and "elsewhere" in message and "server_command" not in message
    assert sorted(p.name for p in folder.iterdir()) == ["sweep-state.json"]  # nothing else made
    assert not (tmp_path / "out").exists()
    # the fronts: the option table's --resume, exit 2
    config = tmp_path / "site.yaml"
    config.write_text(json.dumps({"patchkit": {"profile": {"remote": given}}}))
    proc = invoke_with_config(config, "profile.remote", "--resume", str(empty))
    assert proc.returncode == 2 and "no sweep-state.json there" in proc.stderr, proc.stderr
    proc = invoke_with_config(config, "profile.remote", "--resume", str(tmp_path / "nowhere"))
    assert proc.returncode == 2 and "no such folder" in proc.stderr, proc.stderr
    resuming.mark_finished(folder)
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({k: v for k, v in given.items() if k not in ("matrix", "repeat")}))
    proc = module("patchkit.profile.remote", "--config", str(plain), "--resume", str(folder))
    assert proc.returncode == 2 and "--resume is for a sweep" in proc.stderr, proc.stderr
    proc = module(
        "patchkit.profile.remote",
        "--config",
        str(tmp_path / "site.yaml"),
        "--section",
        "patchkit.profile.remote",
        "--resume",
        str(folder),
    )
    assert proc.returncode == 2, proc.stderr
    assert "that sweep finished (stopped: -, 0 round(s), 0 run(s)); nothing to resume" in proc.stderr


BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


@pytest.mark.skipif(not BOOT_ID.exists(), reason="the boot id is Linux's")
def test_the_agent_leaves_a_job_of_an_earlier_boot_alone(tmp_path):
    """What a cut run left is stopped by its remote folder's records; a job recorded in another
    boot of the machine is not signalled (its process group id may be another process's now),
    and a folder already removed is nothing to stop or remove."""
    run = tmp_path / "run"
    run.mkdir()
    started = agent("start", str(run), "server", str(tmp_path), "{}", "exec sleep 60")
    assert started.returncode == 0, started.stderr
    pgid = json.loads(started.stdout)["pgid"]
    assert (run / "server.boot").read_text() == BOOT_ID.read_text()
    (run / "server.boot").write_text("another-boot\n")
    answer = json.loads(agent("stop", str(run), "1", "TERM").stdout)
    assert answer["jobs"][0]["sent"] == [] and group_members(pgid)
    (run / "server.boot").write_text(BOOT_ID.read_text())
    answer = json.loads(agent("stop", str(run), "1", "TERM").stdout)
    assert answer["jobs"][0]["sent"] == ["TERM"] and not group_members(pgid)
    gone = str(tmp_path / "removed")
    assert json.loads(agent("stop", gone, "1", "TERM").stdout) == {"jobs": [], "missing": True}
    assert json.loads(agent("cleanup", gone).stdout) == {"removed": None}
