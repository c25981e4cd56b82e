"""profile.remote --matrix with --budget / --until decided / --gpus: rounds until the
sequential verdict is decided, dropping clear losers, stopping before a round that would not
fit the budget, the plan of more runs, the spread cache, one server per GPU at once (its own
CUDA_VISIBLE_DEVICES and port, a failing GPU recorded), the per-phase companion verdict.

The sweeps run on local directory targets (no sshd) with the stand-in server and benchmark of
tests/support/standin_server.py: ``--tok-s R`` sets a point's throughput, the benchmark reports it
times exp(N(0, 2 %)) seeded from a counter file (the same numbers on every run), ``--gpu-factor``
makes a GPU faster, ``--fail-on-gpu`` breaks one, ``--verify-scale`` slows a point's verify;
``--root-factor`` and ``--fail-on-root`` do the same for a target (``--blocks hosts``), keyed by
its root (PATCHKIT_TARGET_ROOT): two local folders stand for two hosts.
The tests that need the sglang wheel tree (the ``budget_tree`` fixture) are marked ``wheels``
(one also ``sshd``, through its fixture); the rest are unit tests of the pieces.
"""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path

import pytest

from patchkit.errors import InvalidInput
from patchkit.profile.remote import RemoteConfig
from patchkit.profile.remote.blocks import assign, gpu_config, host_blocks, make_blocks
from patchkit.profile.remote.server_args import drop_options, shift_port
from patchkit.profile.remote.spread import cache_key, cache_path, measured_spread, read_spread, update_spread
from patchkit.profile.remote.sweep import run_remote_sweep
from patchkit.profile.verdict import CYCLE, phase_comparison
from support.cli import interrupt, popen_module, wait_for
from support.remote_run import PY, SPEC, ST, alive, assert_cleaned, settings, state_of
from support.remote_sweep import (
    alive_port_pids,
    argv_of,
    host_commands,
    quiet,
    set_rate,
    sweep_doc,
    two_trees,
)
from support.upstream import sglang_installed


@pytest.fixture
def budget_tree(tmp_path) -> Path:
    return sglang_installed("0.5.9", tmp_path / "site-packages")


def local(tmp_path: Path, tree: Path, **over) -> RemoteConfig:
    base = dict(ssh_config=None, spread_cache=str(tmp_path / "spread.json"))
    base.update(over)
    return RemoteConfig.from_mapping(settings(tmp_path, [str(tree)], tmp_path / "unused", **base))


# ---- the pieces ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command, index, expected",
    [
        ("srv --port 30000 --tp 2", 2, ["--port", "30002", "--tp", "2"]),
        ("srv --port=30000", 1, ["--port=30001"]),
        ('srv --port "$P" --x 1', 3, ["--port", "7", "--x", "1"]),  # an expansion: left to it
        ("srv --tp 2", 1, ["--tp", "2", "--port", "30001"]),  # added (SGLang's default collides)
        ("srv --tp 2 ; echo done", 0, ["--tp", "2", "--port", "30000"]),
    ],
)
def test_shift_port_rewrites_literal_ports_only(command, index, expected):
    P = "printf '%s\\0'"
    got = argv_of(shift_port(command.replace("srv", P), index, default=30000 + index), {"P": "7"})
    assert got[: len(expected)] == expected
    assert shift_port("bench --n 3", 2) == "bench --n 3"  # no default: nothing added


def test_drop_options_removes_swept_flags_and_their_values():
    cmd = "exec srv --model M --speculative-num-steps 3 --tok-s=1000 --flag --port 1"
    assert drop_options(cmd, ["speculative-num-steps", "tok-s"]) == "exec srv --model M --flag --port 1"


@pytest.mark.parametrize("points, gpus", [(3, 3), (5, 2), (2, 4), (4, 4)])
def test_latin_square_each_point_visits_every_gpu_within_a_square(points, gpus):
    for square in range(3):
        seen = {p: [] for p in range(points)}
        for rnd in range(square * gpus, (square + 1) * gpus):
            where = assign(list(range(points)), rnd, gpus, seed=7)
            for p, g in where.items():
                seen[p].append(g)
            if points <= gpus:  # no two points share a GPU in a round
                assert len(set(where.values())) == points
        assert all(sorted(g) == list(range(gpus)) for g in seen.values()), seen
    # seeded: the same seed, the same design; another seed, (here) another one
    design = [assign([0, 1, 2], r, 3, seed=7) for r in range(6)]
    assert design == [assign([0, 1, 2], r, 3, seed=7) for r in range(6)]
    assert design != [assign([0, 1, 2], r, 3, seed=8) for r in range(6)]


def test_gpu_blocks_get_their_own_port_health_url_commands_and_transports(tmp_path):
    cfg = RemoteConfig.from_mapping(
        settings(
            tmp_path,
            ["/srv/a"],
            tmp_path / "unused",
            ssh_config=None,
            port=31000,
            health_url="http://127.0.0.1:31000/health",
            bench_command="bench --port 31000 --n 2",
            warmup_command="bench --port=31000 --n 1",
            matrix="speculative-num-steps=1,2",
            gpus="0,1,3",
        )
    )
    assert cfg.gpus == ["0", "1", "3"]
    third = gpu_config(cfg, 2)
    assert third.port == 31002 and third.url == "http://127.0.0.1:31002/health"
    assert third.bench_command == "bench --port 31002 --n 2"
    assert third.warmup_command == "bench --port=31002 --n 1"
    from patchkit.transport import parse_target

    transports = [parse_target("/srv/a")]
    blocks = make_blocks(cfg, transports)
    assert [(b.name, b.gpu) for b in blocks] == [("gpu0", "0"), ("gpu1", "1"), ("gpu2", "3")]
    assert blocks[0].transports[0] is transports[0] and blocks[2].transports[0] is not transports[0]
    assert blocks[2].env({"A": "1"}) == {"A": "1", "CUDA_VISIBLE_DEVICES": "3"}
    assert "--port 31002" in blocks[2].server_command("srv --model M")


def test_one_gpu_labelled_twice_serves_two_servers(tmp_path):
    """0@a,0@b: two blocks on GPU 0 (CUDA_VISIBLE_DEVICES=0 for both), each its own port;
    the same label twice is refused like a GPU given twice."""
    given = settings(tmp_path, ["/srv/a"], tmp_path / "unused", ssh_config=None, port=31000)
    cfg = RemoteConfig.from_mapping(dict(given, matrix="env:PK=a,b", gpus="0@a,0@b"))
    from patchkit.transport import parse_target

    blocks = make_blocks(cfg, [parse_target("/srv/a")])
    assert [b.gpu for b in blocks] == ["0@a", "0@b"]
    assert [b.env({})["CUDA_VISIBLE_DEVICES"] for b in blocks] == ["0", "0"]
    assert [b.cfg.port for b in blocks] == [31000, 31001]
    assert "CUDA_VISIBLE_DEVICES=0@b, port 31001" in blocks[1].describe()
    for bad, words in (("0@a,0@a", "0@a given twice"), ("0,0", "label them"), ("0@", "GPU indices")):
        with pytest.raises(InvalidInput, match=words):
            RemoteConfig.from_mapping(dict(given, matrix="env:PK=a,b", gpus=bad))


def test_phase_comparison_flags_the_phase_that_differs():
    def runs(verify, n=4):
        return [
            {CYCLE: 10 + verify + 0.01 * i, "verify": verify * (1 + 0.002 * i), "draft": 3.0 + 0.003 * i}
            for i in range(n)
        ]

    got = phase_comparison({"a": runs(6.0), "b": runs(6.6)}, "a")
    b = got["points"]["b"]
    assert b["verify"]["differs"] and b["verify"]["ratio"] == pytest.approx(1.1, rel=1e-3)
    assert b["verify"]["ratio_ci"][0] > 1.05 and not b["draft"]["differs"]
    assert got["leader"] == "a" and phase_comparison({"a": []}, "a") is None


def test_spread_cache_pools_and_survives_a_bad_file(tmp_path, monkeypatch):
    path = tmp_path / "c" / "spread.json"
    key = cache_key(
        ["/srv/a"],
        "srv --model M --speculative-num-steps 3 --x 1",
        {"speculative-num-steps": ["1"], "env:A": ["1"]},
    )
    assert json.loads(key) == [["/srv/a"], "srv --model M --x 1"]  # the swept flag is not part of it
    assert read_spread(path, key) is None
    runs = {"a": [100.0, 102.0, 98.0], "b": [200.0, None, 204.0]}
    measured = measured_spread(runs)
    logs_a = [math.log(v) for v in runs["a"]]
    mean_a = sum(logs_a) / 3
    ss = sum((x - mean_a) ** 2 for x in logs_a) + (math.log(204 / 200) ** 2) / 2
    assert measured["df"] == 3 and measured["runs"] == 5
    assert measured["spread"] == pytest.approx(math.sqrt(ss / 3))
    first = update_spread(path, key, measured)
    assert read_spread(path, key)["spread"] == pytest.approx(first["spread"])
    second = update_spread(path, key, {"spread": 0.04, "df": 3, "runs": 4})
    assert second["df"] == 6 and second["runs"] == 9
    assert second["spread"] == pytest.approx(math.sqrt((first["spread"] ** 2 + 0.04**2) / 2))
    path.write_text("{not json")
    assert read_spread(path, key) is None
    assert update_spread(path, key, measured)["df"] == 3  # a bad file is replaced
    # where the cache lives: the setting, else $PATCHKIT_SPREAD_CACHE, else ~/.cache; off: none
    monkeypatch.setenv("PATCHKIT_SPREAD_CACHE", str(tmp_path / "env.json"))
    assert cache_path(None) == tmp_path / "env.json" and cache_path(str(path)) == path
    assert cache_path("off") is None
    monkeypatch.delenv("PATCHKIT_SPREAD_CACHE")
    assert cache_path(None) == Path("~/.cache/patchkit/spread.json").expanduser()


@pytest.mark.parametrize(
    "over, words",
    [
        ({"budget_minutes": 0}, "budget_minutes 0"),
        ({"budget_minutes": "soon"}, "budget_minutes 'soon'"),
        ({"budget_minutes": -2}, "budget_minutes -2"),
        ({"until": "forever"}, "until 'forever'"),
        ({"gpus": "0,0"}, "0 given twice"),
        ({"gpus": "a;b"}, "GPU indices"),
        ({"gpus": ""}, "comma-separated"),
        ({"gpus": "0,1", "baseline": True}, "baseline"),
        ({"gpus": "0,1", "env": {"CUDA_VISIBLE_DEVICES": "2"}}, "CUDA_VISIBLE_DEVICES"),
        ({"gpus": "0,1", "matrix": "env:CUDA_VISIBLE_DEVICES=1,2"}, "CUDA_VISIBLE_DEVICES"),
        ({"gpus": "0,1", "health_url": "http://127.0.0.1:1/health"}, "health_url"),
        ({"until": "decided", "matrix": None}, "for a sweep"),
        ({"sweep_seed": -1}, "sweep_seed"),
        ({"blocks": "gpus"}, "blocks 'gpus': fleet or hosts"),
        ({"blocks": 3}, "blocks '3'"),
        ({"blocks": "hosts", "baseline": True}, "baseline"),
        ({"blocks": "hosts", "health_url": "http://127.0.0.1:1/health"}, "health_url"),
        ({"blocks": "hosts", "matrix": None}, "for a sweep"),
    ],
)
def test_bad_sequential_settings_are_refused_before_anything_runs(tmp_path, over, words):
    given = settings(tmp_path, ["pk-test:/srv/site"], tmp_path / "n", matrix="speculative-num-steps=1,2")
    given.update(over)
    with pytest.raises(InvalidInput, match=words):
        RemoteConfig.from_mapping({k: v for k, v in given.items() if v is not None or k != "matrix"})
    assert not (tmp_path / "out").exists()
    cfg = RemoteConfig.from_mapping(
        settings(
            tmp_path,
            ["pk-test:/srv/site"],
            tmp_path / "n",
            matrix="tok-s=1",
            until="Decided",
            budget_minutes="2.5",
        )
    )
    assert cfg.until == "decided" and cfg.budget_minutes == 2.5 and cfg.sequential and cfg.rounds == 20
    assert RemoteConfig.from_mapping(settings(tmp_path, ["/t"], tmp_path / "n", matrix="tok-s=1")).rounds == 5


# ---- sequential sweeps on a local target ----------------------------------------------------------


@pytest.mark.wheels
def test_until_decided_stops_early_and_names_the_best(tmp_path, budget_tree):
    """Two points 50 % apart (2 % noise): decided after a few rounds, far below the 12 allowed;
    every round recorded with its decision; the spread measured goes to the cache."""
    cfg = local(
        tmp_path,
        budget_tree,
        matrix="tok-s=1000,1500",
        until="decided",
        repeat=12,
        **set_rate(tmp_path, 1000),
    )
    outcome = run_remote_sweep(cfg, stream=quiet())
    doc = sweep_doc(outcome)
    assert doc["stopped"] == "decided" and doc["until"] == "decided" and doc["max_rounds"] == 12
    rounds = doc["rounds"]
    assert 2 <= len(rounds) < 12
    assert [r["round"] for r in rounds] == list(range(1, len(rounds) + 1))
    assert all(sorted(r["points"]) == ["tok-s=1000", "tok-s=1500"] for r in rounds[:-1])
    assert rounds[-1]["decision"]["status"] == "decided" and rounds[0]["decision"]["status"] == "undecided"
    assert all(r["minutes"] > 0 and set(r["tokens_per_s"]) == set(r["points"]) for r in rounds)
    decision = doc["decision"]
    assert decision["status"] == "decided" and decision["best"] == "tok-s=1500"
    # --repeat bounds the rounds: the bounded test, its level spent over those 12, the stop marked
    assert decision["design"] == "group-sequential" and decision["horizon"] == 12
    assert decision["early_stop"] is True and "biased upward" in decision["estimates_note"]
    assert doc["verdict"]["best"] == "tok-s=1500" and doc["verdict"]["significant"] is True
    assert doc["best"] == "tok-s=1500" and doc["dropped"]["tok-s=1000"]["round"] == len(rounds)
    assert "worse than tok-s=1500" in doc["dropped"]["tok-s=1000"]["reason"]
    assert doc["plan"] is None  # decided: nothing to plan
    assert len(doc["order"]) == 2 * len(rounds) and doc["verdict"]["cost"]["rounds"] == len(rounds)
    md = (outcome.run_dir / "sweep.md").read_text()
    assert "verdict: best tok-s=1500 -- decided after" in md and "stopped: decided" in md
    assert "alpha spent over a horizon of 12 round(s)" in md and "estimates: stopped when decided" in md
    # where each start's time went: every run keeps its benchmark's duration, and each run with a
    # time split (10 cycle periods; the stand-in's short runs have none) is a start in the table;
    # the stand-in runs no prefill cycle, so there is nothing to adjust (tests/profile/test_adjusted.py)
    every = [x for r in doc["rows"] for x in r["runs"] if x["ok"]]
    assert every and all(x["duration_s"] > 0 for x in every)
    assert len(doc["starts"]) == sum(x["time_split"] is not None for x in every)
    assert doc["adjusted"] is None
    assert "| **tok-s=1500** |" in md
    # the spread cache: written in tmp_path, keyed without the swept --tok-s
    cache = json.loads((tmp_path / "spread.json").read_text())
    ((key, entry),) = cache["entries"].items()
    assert "--tok-s" not in json.loads(key)[1] and json.loads(key)[0] == [str(budget_tree)]
    assert 0.002 < entry["spread"] < 0.06 and entry["runs"] == 2 * len(rounds)
    assert doc["spread"]["written"]["spread"] == entry["spread"] and doc["spread"]["prior"] is None
    assert_cleaned(tmp_path, budget_tree)


@pytest.mark.wheels
def test_a_clear_loser_is_dropped_and_the_rest_get_a_plan(tmp_path, budget_tree, monkeypatch):
    """1000 against 1500 and 1510 tok/s: 1000 is dropped after a round or two and not run again;
    1500 and 1510 (0.7 % apart) stay undecided until the rounds run out, and the table says how
    many more runs (and minutes) would resolve 5 %; the spread remembered from an earlier sweep
    (PATCHKIT_SPREAD_CACHE) is read as the prior."""
    cache = tmp_path / "env-cache.json"
    monkeypatch.setenv("PATCHKIT_SPREAD_CACHE", str(cache))
    given = dict(
        matrix="tok-s=1000,1500,1510",
        until="decided",
        repeat=5,
        spread_cache=None,
        **set_rate(tmp_path, 1000),
    )
    key = cache_key([str(budget_tree)], given["server_command"], {"tok-s": []})
    update_spread(cache, key, {"spread": 0.02, "df": 4, "runs": 6})
    outcome = run_remote_sweep(local(tmp_path, budget_tree, **given), stream=quiet())
    doc = sweep_doc(outcome)
    assert doc["stopped"] == "max rounds" and len(doc["rounds"]) == 5
    drop = doc["dropped"]["tok-s=1000"]
    assert drop["round"] <= 3 and "worse than" in drop["reason"]
    ran = [o["label"] for o in doc["order"]]
    assert ran.count("tok-s=1000") == drop["round"] and ran.count("tok-s=1500") == 5
    assert all("tok-s=1000" not in r["points"] for r in doc["rounds"][drop["round"] :])
    row = next(r for r in doc["rows"] if r["label"] == "tok-s=1000")
    assert row["dropped"] == drop and len(row["repeats"]) == drop["round"]
    assert doc["decision"]["status"] == "undecided" and doc["verdict"]["best"] is None
    assert sorted(doc["decision"]["contenders"]) == ["tok-s=1500", "tok-s=1510"]
    plan = doc["plan"]
    assert plan["difference"] == 0.05 and sorted(plan["points"]) == ["tok-s=1500", "tok-s=1510"]
    for entry in plan["points"].values():
        assert entry["more_runs"] is not None and entry["more_runs"] >= 0 and entry["minutes"] is not None
    assert doc["spread"]["prior"]["spread"] == 0.02 and doc["spread"]["cache"] == str(cache)
    assert json.loads(cache.read_text())["entries"][key]["runs"] > 6  # pooled with this sweep's
    text = outcome.table
    assert "verdict: undecided after 5 round(s)" in text and "stopped: max rounds" in text
    assert "dropped after round" in text and "to resolve a 5 % difference at the spread measured" in text
    assert "more run(s), ~" in text
    assert state_of(budget_tree) == "pristine"


@pytest.mark.wheels
def test_budget_stops_before_a_round_that_would_not_fit(tmp_path, budget_tree):
    """Each run takes over a second (the server's start-up delay); a 2.4-second budget lets the
    first round run (it always does) and stops before the second, which would not fit."""
    given = set_rate(tmp_path, 1000)
    given["server_command"] += " --startup-delay 1.0"
    cfg = local(tmp_path, budget_tree, matrix="env:PK_TWIN=1,2", budget_minutes=0.04, **given)
    outcome = run_remote_sweep(cfg, stream=quiet())
    doc = sweep_doc(outcome)
    assert doc["stopped"] == "budget" and len(doc["rounds"]) == 1 and doc["budget_minutes"] == 0.04
    assert doc["rounds"][0]["wall_s"] > 2.0 and len(doc["order"]) == 2
    assert doc["decision"]["status"] == "undecided" and doc["verdict"]["best"] is None
    # the budget bounds the rounds: the horizon is what it allows, fixed after round 1
    assert doc["decision"]["design"] == "group-sequential" and doc["decision"]["horizon"] == 1
    assert "stopped: budget" in outcome.table and "budget 0.04 min" in outcome.table
    assert_cleaned(tmp_path, budget_tree)


@pytest.mark.wheels
def test_per_phase_companion_verdict(tmp_path, budget_tree):
    """Two points whose target_verify differs fivefold and whose tok/s does not: tok/s cannot
    tell them apart at 4 runs, the per-phase verdict can (verify and target_verify differ;
    host time on this CPU, so the whole cycle's ratio is only checked for its direction)."""
    cfg = local(tmp_path, budget_tree, matrix="verify-scale=1,5", repeat=4, **set_rate(tmp_path, 1000))
    outcome = run_remote_sweep(cfg, stream=quiet())
    doc = sweep_doc(outcome)
    assert doc["verdict"]["significant"] is False and "decision" not in doc  # a fixed sweep
    phases = doc["phase_verdict"]
    leader = phases["leader"]
    ((other, compared),) = phases["points"].items()
    assert {leader, other} == {"verify-scale=1", "verify-scale=5"}
    slower = other == "verify-scale=5"
    for name in ("target_verify", "verify", CYCLE):
        entry = compared[name]
        assert entry["runs"] == [4, 4] and ((entry["ratio"] > 1.3) if slower else (entry["ratio"] < 1 / 1.3))
        lo, hi = entry["ratio_ci"]
        assert lo < entry["ratio"] < hi
        assert entry["differs"] or name == CYCLE, (name, entry)
    assert "draft" in compared and "accept" in compared  # nested phases are compared too
    for row in doc["rows"]:  # each run keeps its phases' ms per decode cycle
        for run in row["runs"]:
            assert run["phase_ms"][CYCLE] > 0 and run["phase_ms"]["target_verify"] > 0
    text = outcome.table
    assert f"phases against {leader}" in text and f"  {other}: differ: target_verify" in text
    assert "by a sweep with --until decided" in text  # the fixed sweep's plan


# ---- several GPUs at once ---------------------------------------------------------------------------


def gpu_commands(tmp_path: Path, base: int, extra: str = "") -> dict:
    """Literal --port BASE in both commands (rewritten per GPU); a pid file and a seed counter
    per GPU (the benchmarks of two GPUs run at once)."""
    pids = shlex.quote(str(tmp_path / "server.pids.gpu"))
    seed = shlex.quote(str(tmp_path / "seed"))
    return dict(
        port=base,
        server_command=(
            f'PYTHONPATH="$PATCHKIT_TARGET_ROOT" exec {PY} {ST} serve --port {base} {SPEC} '
            f'--pid-file {pids}"$CUDA_VISIBLE_DEVICES" --tok-s 1000 --startup-delay 0.5 {extra}'
        ),
        bench_command=(
            f"{PY} {ST} bench --port {base} --requests 1 --cycles 6 --noise 0.02 "
            f'--seed-file {seed}."$PATCHKIT_SERVER_PORT"'
        ),
    )


def _alive_pids(tmp_path: Path, gpu: str) -> list[int]:
    return [int(p) for p in (tmp_path / f"server.pids.gpu{gpu}").read_text().split() if alive(int(p))]


@pytest.mark.wheels
def test_gpus_serve_points_at_once_each_with_its_device_and_port(tmp_path, budget_tree):
    """--gpus 0,1: per round both points run at the same time, one per GPU, each server with
    its CUDA_VISIBLE_DEVICES and port base+index (the literal --port of both commands
    rewritten); over two rounds each point ran on both GPUs; the decision pairs by block and
    the faster GPU (x1.2) shows in the block effects, not in the verdict."""
    from support.sshd import free_port

    base = free_port(2)
    given = gpu_commands(tmp_path, base, "--gpu-factor 1=1.2")
    cfg = local(tmp_path, budget_tree, matrix="tok-s=1000,1300", gpus="0,1", repeat=2, sweep_seed=3, **given)
    outcome = run_remote_sweep(cfg, stream=quiet())
    doc = sweep_doc(outcome)
    assert doc["blocks"] == [
        {"name": "gpu0", "gpu": "0", "port": base},
        {"name": "gpu1", "gpu": "1", "port": base + 1},
    ]
    assert doc["seed"] == 3 and doc["stopped"] == "max rounds" and len(doc["rounds"]) == 2
    for row in doc["rows"]:
        assert sorted(r["block"] for r in row["runs"]) == ["gpu0", "gpu1"]  # each GPU ran it
        for run in row["runs"]:
            gpu = run["block"][-1]
            log = (outcome.run_dir / run["report"] / "node0" / "server.log").read_text()
            assert f"env CUDA_VISIBLE_DEVICES={gpu}\n" in log
            assert f"listening on 127.0.0.1:{base + int(gpu)}" in log
            assert f"env PATCHKIT_SERVER_PORT={base + int(gpu)}\n" in log
            bench = (outcome.run_dir / run["report"] / "benchmark.log").read_text()
            assert "Output token throughput" in bench
            rate = 1000 if row["label"] == "tok-s=1000" else 1300
            assert run["tokens_per_s"] == pytest.approx(rate * (1.2 if gpu == "1" else 1.0), rel=0.1)
            summary = json.loads((outcome.run_dir / run["report"] / "summary.json").read_text())
            assert summary["meta"]["sweep_block"].startswith(f"gpu{gpu} (CUDA_VISIBLE_DEVICES={gpu}")
    for record in doc["rounds"]:  # one point per GPU in every round: at the same time
        assert sorted(record["blocks"].values()) == ["gpu0", "gpu1"]
        walls = [r["wall_s"] for row in doc["rows"] for r in row["runs"] if r["rep"] == record["round"]]
        assert record["wall_s"] < 0.85 * sum(walls), (record["wall_s"], walls)
    assert sorted((o["rep"], o["block"]) for o in doc["order"]) == [
        (1, "gpu0"),
        (1, "gpu1"),
        (2, "gpu0"),
        (2, "gpu1"),
    ]
    effects = doc["block_effects"]
    assert math.exp(effects["gpu1"] - effects["gpu0"]) == pytest.approx(1.2, rel=0.06)
    decision = doc["decision"]
    assert decision["estimates"]["tok-s=1300"] / decision["estimates"]["tok-s=1000"] == pytest.approx(
        1.3, rel=0.06
    )
    # a fixed sweep on several GPUs is judged by the bounded test over its --repeat rounds
    assert decision["design"] == "group-sequential" and decision["horizon"] == 2
    assert "block effects" in outcome.table and "gpu1 +" in outcome.table
    assert "GPUs 0,1 at once" in outcome.table
    assert not _alive_pids(tmp_path, "0") and not _alive_pids(tmp_path, "1")
    assert state_of(budget_tree) == "pristine"


@pytest.mark.wheels
def test_a_failing_gpu_is_recorded_and_the_sweep_goes_on(tmp_path, budget_tree):
    """GPU 1's servers exit at start (an ECC error): every point's run there is recorded with
    its error and block, the runs on GPU 0 count, the sweep ends normally and says so."""
    from support.sshd import free_port

    given = gpu_commands(tmp_path, free_port(2), "--fail-on-gpu 1")
    cfg = local(
        tmp_path, budget_tree, matrix="tok-s=1000,1300", gpus="0,1", until="decided", repeat=2, **given
    )
    outcome = run_remote_sweep(cfg, stream=quiet())
    doc = sweep_doc(outcome)
    assert [r["ok"] for r in doc["rows"]] == [True, True]
    failed = [(row["label"], r) for row in doc["rows"] for r in row["runs"] if not r["ok"]]
    assert len(failed) == 2 and {r["block"] for _, r in failed} == {"gpu1"}
    assert all("uncorrectable ECC error on GPU 1" in r["error"] for _, r in failed)
    good = [r for row in doc["rows"] for r in row["runs"] if r["ok"]]
    assert len(good) == 2 and {r["block"] for r in good} == {"gpu0"}
    assert all(record["errors"] for record in doc["rounds"])
    assert all(None in row["repeats"] for row in doc["rows"])
    assert "points with failed repetitions (2)" in outcome.table
    assert doc["stopped"] == "max rounds" and not doc["dropped"]
    assert state_of(budget_tree) == "pristine"


@pytest.mark.wheels
def test_ctrl_c_stops_every_gpu_and_reverts(tmp_path, budget_tree):
    """A real profile process, --gpus 0,1: one point's server hangs in /generate (PK_HANG) while
    the other GPU serves the other point; SIGINT: exit 130, both GPUs' servers stopped, the tree
    reverted, sweep.json says interrupted."""
    from support.sshd import free_port

    hang = tmp_path / "hanging"
    given = settings(
        tmp_path,
        [str(budget_tree)],
        tmp_path / "unused",
        ssh_config=None,
        matrix=f"env:PK_HANG=no,{hang}",
        gpus="0,1",
        until="decided",
        spread_cache=str(tmp_path / "spread.json"),
        **gpu_commands(tmp_path, free_port(2)),
    )
    config = tmp_path / "remote.json"
    config.write_text(json.dumps(given))
    with popen_module("patchkit.profile.remote", "--config", str(config), cwd=tmp_path) as proc:
        assert wait_for(proc, hang, 60), proc.communicate(timeout=30)
        err = interrupt(proc, settle=0.5)
    assert proc.returncode == 130, err
    runs = list((tmp_path / "out").iterdir())
    doc = json.loads((runs[0] / "sweep.json").read_text())
    assert doc["interrupted"] is True and doc["stopped"] == "interrupted"
    assert doc["rounds"][0]["round"] == 1
    for gpu in ("0", "1"):
        assert (tmp_path / f"server.pids.gpu{gpu}").exists() and not _alive_pids(tmp_path, gpu)
    assert not (tmp_path / "spread.json").exists()  # an interrupted sweep does not teach the cache
    assert state_of(budget_tree) == "pristine"
    assert not any((tmp_path / "remote").iterdir())


@pytest.mark.wheels
def test_gpus_through_sshd(tmp_path, sshd, budget_tree):
    """The same over a real SSH target: each GPU's runs ride their own copy of the transport,
    at the same time; revert and cleanup as always."""
    from support.sshd import free_port

    base = free_port(2)
    cfg = RemoteConfig.from_mapping(
        settings(
            tmp_path,
            [f"{sshd.alias}:{budget_tree}"],
            sshd.client_config,
            matrix="tok-s=1000,1300",
            gpus="0,1",
            repeat=1,
            **gpu_commands(tmp_path, base),
        )
    )
    outcome = run_remote_sweep(cfg, stream=quiet())
    doc = sweep_doc(outcome)
    assert [r["ok"] for r in doc["rows"]] == [True, True]
    assert sorted(r["runs"][0]["block"] for r in doc["rows"]) == ["gpu0", "gpu1"]
    for row in doc["rows"]:
        run = row["runs"][0]
        log = (outcome.run_dir / run["report"] / "node0" / "server.log").read_text()
        gpu = int(run["block"][-1])
        assert f"env CUDA_VISIBLE_DEVICES={gpu}\n" in log and f"listening on 127.0.0.1:{base + gpu}" in log
    assert state_of(budget_tree) == "pristine" and not any((tmp_path / "remote").iterdir())


# ---- several targets as blocks (--blocks hosts) ------------------------------------------------------


def test_host_blocks_one_per_target_or_per_target_and_gpu(tmp_path):
    from patchkit.transport import parse_target

    def cfg_of(**over):
        return RemoteConfig.from_mapping(
            settings(
                tmp_path,
                ["/srv/a", "/srv/b"],
                tmp_path / "n",
                ssh_config=None,
                port=31000,
                matrix="tok-s=1,2",
                **over,
            )
        )

    fleet = cfg_of()
    assert fleet.blocks == "fleet" and not fleet.hosts_as_blocks
    transports = [parse_target("/srv/a"), parse_target("/srv/b")]
    assert [b.name for b in make_blocks(fleet, transports)] == [None]  # one fleet, one block
    hosts = cfg_of(blocks="Hosts")
    assert hosts.blocks == "hosts"
    blocks = make_blocks(hosts, transports)
    assert [(b.name, b.gpu, b.cfg.port, b.target) for b in blocks] == [
        ("/srv/a", None, 31000, "/srv/a"),
        ("/srv/b", None, 31001, "/srv/b"),
    ]
    assert [b.transports for b in blocks] == [[transports[0]], [transports[1]]]  # its own target alone
    assert blocks[1].env({"A": "1"}) == {"A": "1"}  # no CUDA_VISIBLE_DEVICES without gpus
    assert "--port 31001" in blocks[1].server_command("srv --model M")
    assert blocks[1].describe() == "/srv/b (port 31001)"
    pairs = host_blocks(cfg_of(blocks="hosts", gpus="0,1"), transports)
    assert [(b.name, b.gpu, b.cfg.port) for b in pairs] == [
        ("/srv/a gpu0", "0", 31000),
        ("/srv/a gpu1", "1", 31001),
        ("/srv/b gpu0", "0", 31002),
        ("/srv/b gpu1", "1", 31003),
    ]
    assert pairs[0].transports[0] is transports[0] and pairs[1].transports[0] is not transports[0]
    assert pairs[1].transports[0].root == "/srv/a" and pairs[3].env({}) == {"CUDA_VISIBLE_DEVICES": "1"}


@pytest.mark.wheels
def test_hosts_as_blocks_serve_points_at_once_and_the_decision_pairs_by_host(tmp_path, capsys):
    """--blocks hosts with two local-folder targets, the second 8 % faster: per round both
    points run at the same time, one per target, each its own one-node server on port
    base+index; over four rounds each point ran twice on each target; runs' block is the
    target's label; the faster host shows in the block effects, not in the verdict; the series
    was applied and reverted on both targets once."""
    from support.sshd import free_port

    a, b = two_trees(tmp_path)
    base = free_port(2)
    given = host_commands(tmp_path, base, f"--root-factor {shlex.quote(str(b))}=1.08")
    cfg = RemoteConfig.from_mapping(
        settings(
            tmp_path,
            [str(a), str(b)],
            tmp_path / "unused",
            ssh_config=None,
            spread_cache=str(tmp_path / "spread.json"),
            matrix="tok-s=1000,1300",
            blocks="hosts",
            repeat=4,
            sweep_seed=5,
            **given,
        )
    )
    outcome = run_remote_sweep(cfg, stream=quiet())
    doc = sweep_doc(outcome)
    assert doc["blocks"] == [
        {"name": str(a), "gpu": None, "port": base, "target": str(a)},
        {"name": str(b), "gpu": None, "port": base + 1, "target": str(b)},
    ]
    assert doc["block_kind"] == "targets" and doc["seed"] == 5 and len(doc["rounds"]) == 4
    for row in doc["rows"]:
        assert sorted(r["block"] for r in row["runs"]) == sorted([str(a), str(a), str(b), str(b)])
        for run in row["runs"]:
            index = [str(a), str(b)].index(run["block"])
            log = (outcome.run_dir / run["report"] / "node0" / "server.log").read_text()
            assert f"env PATCHKIT_TARGET_ROOT={run['block']}\n" in log
            assert "env PATCHKIT_NNODES=1\n" in log and "env PATCHKIT_NODE_RANK=0\n" in log
            assert f"listening on 127.0.0.1:{base + index}" in log
            assert not (outcome.run_dir / run["report"] / "node1").exists()  # one node per run
            rate = 1000 if row["label"] == "tok-s=1000" else 1300
            assert run["tokens_per_s"] == pytest.approx(rate * (1.08 if index else 1.0), rel=0.07)
            summary = json.loads((outcome.run_dir / run["report"] / "summary.json").read_text())
            assert summary["meta"]["sweep_block"] == f"{run['block']} (port {base + index})"
    for record in doc["rounds"]:  # one point per target in every round: at the same time
        assert sorted(record["blocks"].values()) == sorted([str(a), str(b)])
        walls = [r["wall_s"] for row in doc["rows"] for r in row["runs"] if r["rep"] == record["round"]]
        assert record["wall_s"] < 0.85 * sum(walls), (record["wall_s"], walls)
    effects = doc["block_effects"]
    assert math.exp(effects[str(b)] - effects[str(a)]) == pytest.approx(1.08, rel=0.03)
    assert effects[str(b)] > 0 > effects[str(a)]
    decision = doc["decision"]
    assert decision["estimates"]["tok-s=1300"] / decision["estimates"]["tok-s=1000"] == pytest.approx(
        1.3, rel=0.05
    )
    assert doc["verdict"]["cost"]["server_starts"] == 8  # one server a run, not one per target
    assert "block effects" in outcome.table and f"{b} +" in outcome.table
    assert "2 targets as blocks at once" in outcome.table
    assert not alive_port_pids(tmp_path, base) and not alive_port_pids(tmp_path, base + 1)
    assert state_of(a) == "pristine" and state_of(b) == "pristine"
    log = capsys.readouterr().err  # the series went onto both targets once, for the whole sweep
    assert log.count("applied sglang-v0.5.9 to 2 target(s)") == 1 and log.count("reverted 2 target(s)") == 1
    assert "2 targets at once" in log


@pytest.mark.wheels
def test_a_failing_host_is_recorded_and_the_sweep_goes_on(tmp_path):
    """The second target's servers exit at start: every point's run there is recorded with its
    error and block (the target's label), the runs on the first count, the sweep ends
    normally, and both targets are reverted."""
    from support.sshd import free_port

    a, b = two_trees(tmp_path)
    given = host_commands(tmp_path, free_port(2), f"--fail-on-root {shlex.quote(str(b))}")
    cfg = RemoteConfig.from_mapping(
        settings(
            tmp_path,
            [str(a), str(b)],
            tmp_path / "unused",
            ssh_config=None,
            spread_cache=str(tmp_path / "spread.json"),
            matrix="tok-s=1000,1300",
            blocks="hosts",
            until="decided",
            repeat=2,
            **given,
        )
    )
    outcome = run_remote_sweep(cfg, stream=quiet())
    doc = sweep_doc(outcome)
    assert [r["ok"] for r in doc["rows"]] == [True, True]
    failed = [r for row in doc["rows"] for r in row["runs"] if not r["ok"]]
    assert len(failed) == 2 and {r["block"] for r in failed} == {str(b)}
    assert all("this host" in r["error"] and "lost its network" in r["error"] for r in failed)
    good = [r for row in doc["rows"] for r in row["runs"] if r["ok"]]
    assert len(good) == 2 and {r["block"] for r in good} == {str(a)}
    assert all(record["errors"] for record in doc["rounds"])
    assert "points with failed repetitions (2)" in outcome.table
    assert doc["stopped"] == "max rounds" and not doc["dropped"]
    assert state_of(a) == "pristine" and state_of(b) == "pristine"


def test_plan_line_tells_no_spread_from_a_spread_too_wide():
    """A contender whose plan has no runs: with no spread measured the line says so; with a
    spread so wide that no run count within the planner's cap resolves the difference, it
    says that, with the spread."""
    from patchkit.profile.remote.sweep import extra_lines
    from patchkit.profile.sequential import MAX_RUNS

    plan = {
        "difference": 0.05,
        "test": "sequential",
        "points": {
            "a": {"more_runs": None, "spread": 0.62, "minutes": None},
            "b": {"more_runs": None, "spread": None, "minutes": None},
            "c": {"more_runs": 4, "spread": 0.03, "minutes": 8.0},
        },
    }
    (line,) = extra_lines({"plan": plan}, {"significant": False})
    assert f"a: more than {MAX_RUNS} runs at 62.0 % between starts" in line
    assert "b: cannot say (no spread measured yet)" in line
    assert "c: 4 more run(s), ~8.0 min" in line


def test_a_blocked_decision_without_its_own_spread_is_planned_from_the_measured_one():
    """Two rounds on two GPUs (as on the H200 with two servers sharing one): the paired test
    has no spread of its own yet, so its plan would say nothing; the spread measured between
    starts (block effects out) plans the contenders instead, and says where it came from."""
    from types import SimpleNamespace

    from patchkit.profile.remote.sweep import PLAN_DIFFERENCE, _plan
    from patchkit.profile.sequential import plan_runs

    runs = {"a": [1000.0, 1030.0], "b": [990.0, 1010.0]}
    state = SimpleNamespace(samples=lambda: (runs, {}), _estimate_s=lambda label: 60.0)
    decision = SimpleNamespace(
        contenders=["a", "b"],
        plan={
            label: {"more_runs": None, "for_difference": PLAN_DIFFERENCE, "spread": None} for label in "ab"
        },
    )
    verdict = {"significant": False, "indistinguishable": ["a", "b"]}
    need = plan_runs(0.02, PLAN_DIFFERENCE, points=2)
    plan = _plan([], verdict, decision, state, 2, {"spread": 0.02, "df": 1, "runs": 4})
    assert need is not None and need > 2
    for label in "ab":
        entry = plan["points"][label]
        assert entry["more_runs"] == need - 2 and entry["spread"] == 0.02
        assert entry["spread_source"] == "measured between starts"
        assert entry["minutes"] == pytest.approx((need - 2) * 1.0)
    assert plan["wall_minutes"] == pytest.approx(plan["server_minutes"] / 2)
    # with no measured spread either, it still says it cannot tell
    plan = _plan([], verdict, decision, state, 2, None)
    assert all(e["more_runs"] is None and e["spread"] is None for e in plan["points"].values())
