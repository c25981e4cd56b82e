"""--sample N on profile.remote and profile.run (PATCHKIT_TIMER_SAMPLE on the server / workload).

The remote flow runs against a local directory target (no SSH needed) with the stand-in
server of tests/support/standin_server.py, which imports the runtime the series put into the tree.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from patchkit.errors import InvalidInput
from patchkit.profile.remote import RemoteConfig, run_remote
from support.cli import invoke
from support.default_site import PHASE_TIMER, site  # noqa: F401
from support.remote_run import REPO, assert_cleaned, settings, tree  # noqa: F401


def records(run_dir):
    files = sorted((run_dir / "timing").glob("phase-timing.rank*.jsonl"))
    return [[json.loads(line) for line in f.read_text().splitlines()] for f in files]


@pytest.mark.wheels
def test_remote_default_is_the_budget_with_one_seed_for_every_rank(tmp_path, tree):  # noqa: F811
    """No --sample: PATCHKIT_TIMER_SAMPLE is not set, the runtime's budget decides (its
    header says so); one seed for every rank."""
    given = settings(tmp_path, [str(tree)], tmp_path / "unused", ssh_config=None)
    del given["timer_sample"]  # the default
    cfg = RemoteConfig.from_mapping(given)
    assert cfg.timer_sample is None and isinstance(cfg.timer_seed, int)
    outcome = run_remote(cfg, stream=open(os.devnull, "w"))
    log = (outcome.run_dir / "node0" / "server.log").read_text()
    assert "PATCHKIT_TIMER_SAMPLE" not in log
    assert f"env PATCHKIT_TIMER_SEED={cfg.timer_seed}\n" in log
    for recs in records(outcome.run_dir):
        sampling = recs[0]["sampling"]
        assert sampling["every"] is None and sampling["budget_pct"] == 1.0
        assert sampling["seed"] == cfg.timer_seed
    assert_cleaned(tmp_path, tree)


@pytest.mark.wheels
def test_remote_sample_16_with_one_seed_for_every_rank(tmp_path, tree):  # noqa: F811
    given = settings(tmp_path, [str(tree)], tmp_path / "unused", ssh_config=None)
    given["timer_sample"] = 16
    cfg = RemoteConfig.from_mapping(given)
    assert cfg.timer_sample == 16 and isinstance(cfg.timer_seed, int)
    outcome = run_remote(cfg, stream=open(os.devnull, "w"))
    log = (outcome.run_dir / "node0" / "server.log").read_text()
    assert "env PATCHKIT_TIMER_SAMPLE=16\n" in log
    assert f"env PATCHKIT_TIMER_SEED={cfg.timer_seed}\n" in log
    files = records(outcome.run_dir)
    assert len(files) == 2  # two ranks
    timed_sets = []
    for recs in files:
        assert recs[0]["sampling"] == {
            "every": 16,
            "method": "bernoulli",
            "seed": cfg.timer_seed,
            "seed_source": "env:PATCHKIT_TIMER_SEED",
        }
        cycles = [r for r in recs if r["kind"] == "cycle"]
        assert [c["cycle"] for c in cycles] == list(range(24))  # every cycle recorded
        timed = {c["cycle"] for c in cycles if c.get("timed") is not False}
        assert {r["cycle"] for r in recs if r["kind"] == "phase"} <= timed
        timed_sets.append(timed)
    assert timed_sets[0] == timed_sets[1]  # one seed: both ranks timed the same cycles
    assert_cleaned(tmp_path, tree)


@pytest.mark.wheels
def test_remote_env_setting_wins_over_the_default(tmp_path, tree):  # noqa: F811
    given = settings(
        tmp_path,
        [str(tree)],
        tmp_path / "unused",
        ssh_config=None,
        env={"PATCHKIT_TIMER_SAMPLE": "1"},
        timer_sample=8,
        timer_seed=5,
    )
    outcome = run_remote(RemoteConfig.from_mapping(given), stream=open(os.devnull, "w"))
    log = (outcome.run_dir / "node0" / "server.log").read_text()
    assert "env PATCHKIT_TIMER_SAMPLE=1\n" in log and "env PATCHKIT_TIMER_SEED=5\n" in log
    for recs in records(outcome.run_dir):
        assert "sampling" not in recs[0]
        assert {r["cycle"] for r in recs if r["kind"] == "phase"} == set(range(24))
        assert not any(r.get("timed") is False for r in recs)


@pytest.mark.wheels
@pytest.mark.parametrize(
    "change, words",
    [
        ({"timer_sample": 0}, "timer_sample 0: a whole number"),
        ({"timer_sample": "eight"}, "timer_sample 'eight'"),
        ({"timer_seed": -1}, "timer_seed -1"),
    ],
)
def test_remote_bad_sampling_settings(tmp_path, tree, change, words):  # noqa: F811
    with pytest.raises(InvalidInput) as info:
        RemoteConfig.from_mapping(settings(tmp_path, [str(tree)], tmp_path / "n", ssh_config=None, **change))
    assert words in info.value.message and info.value.exit_code == 2


@pytest.mark.parametrize("task", ["profile.remote", "profile.run"])
@pytest.mark.parametrize("value", ["0", "-3", "x"])
def test_sample_option_refuses_bad_values(tmp_path, task, value):
    proc = invoke("-r", str(REPO), task, f"--sample={value}", cwd=tmp_path, timeout=60)
    assert proc.returncode == 2, proc.stderr + proc.stdout
    assert f"{task} --sample '{value}': a whole number >= 1" in proc.stderr
    assert os.listdir(tmp_path) == []  # nothing started, nothing written


def test_run_default_passes_the_sample_to_the_workload(site, tmp_path):  # noqa: F811
    """profile.run --sample N: the workload's spec (workload-spec.json) carries it, and the
    workload's apply_timer_spec makes the series' own runtime, in the patched tree, sample."""
    from patchkit.profile import run_default

    with pytest.raises(InvalidInput):
        run_default(tmp_path / "bad", size="ci", site=site, timer_sample=0)
    assert not (tmp_path / "bad").exists()  # refused before anything was made

    def workload(site_dir, spec, run_dir, **kw):
        timing = spec["points"][0]["timing_dir"]
        script = (
            "import importlib.util, json, sys\n"
            "from patchkit.profile.workload import apply_timer_spec\n"
            "apply_timer_spec(json.load(open(sys.argv[1])))\n"
            "s = importlib.util.spec_from_file_location('pt', sys.argv[2])\n"
            "pt = importlib.util.module_from_spec(s); s.loader.exec_module(pt)\n"
            "pt.configure(directory=sys.argv[3])\n"
            "for i in range(200):\n"
            "    pt.cycle_begin(kind='decode'); pt.begin('verify'); pt.end('verify')\n"
            "    pt.cycle_end(accepted=1)\n"
            "pt.shutdown()\n"
        )
        spec_file = run_dir / "spec.json"
        spec_file.write_text(json.dumps(spec))
        proc = subprocess.run(
            [sys.executable, "-c", script, str(spec_file), str(site_dir / PHASE_TIMER), timing],
            env={**os.environ, "PYTHONPATH": str(REPO)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        raise KeyboardInterrupt  # stop before the report: the bracket reverts the tree

    with pytest.raises(KeyboardInterrupt):
        run_default(
            tmp_path / "out",
            size="ci",
            site=site,
            timer_sample=4,
            workload=workload,
            stream=open(os.devnull, "w"),
        )
    (recs,) = records(next((tmp_path / "out").iterdir()))
    assert recs[0]["sampling"]["every"] == 4
    cycles = [r for r in recs if r["kind"] == "cycle"]
    assert len(cycles) == 200
    assert 0 < sum(c.get("timed") is not False for c in cycles) < 120
