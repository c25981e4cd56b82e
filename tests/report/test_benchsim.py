"""The benchmark replay (patchkit.report.benchsim) and profile.predict through it (CPU).

The stand-in here is a closed-loop load written out as records: requests of a fixed length, a
fixed number in flight, decode cycles whose cost is known exactly, a prefill cycle whenever
replacements have arrived. Its true benchmark time at every num-steps is counted while it is
written; the prediction from the run at N must come within a few percent of it.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from patchkit.report.benchsim import (
    MIN_POOL_STEPS,
    Acceptance,
    BenchShape,
    CycleCosts,
    bench_shape,
    cycle_costs,
    simulate,
)
from patchkit.report.predict import predict_run
from support.cli import in_process, invoke
from support.timing_files import header

BENCH = (
    "python3 -m sglang.bench_serving --backend sglang --host 127.0.0.1 --port 30000 --dataset-name random-ids "
    "--random-input-len 128 --random-output-len {L} --random-range-ratio 1 --num-prompts {R} --max-concurrency {C}"
)
CMD = "python3 -m sglang.launch_server --speculative-num-steps {n} --speculative-eagle-topk 1 --speculative-num-draft-tokens {d}"
BASE, PER_REQ, STEP, PREFILL = 9_000_000, 150_000, 400_000, 30_000_000


def test_the_load_is_read_from_a_bench_serving_command():
    shape = bench_shape(BENCH.format(L=256, R=128, C=32))
    assert shape == BenchShape(requests=128, concurrency=32, output_len=256, range_ratio=1.0)
    assert shape.tokens == 128 * 256
    assert bench_shape(
        "python3 -m sglang.bench_serving --dataset-name=random --max-concurrency=8 --num-prompts=20"
    ) == (BenchShape(requests=20, concurrency=8, output_len=1024, range_ratio=0.0))
    # no fixed concurrency, another dataset, another client: the load is unknown
    assert bench_shape(BENCH.format(L=256, R=128, C=32).replace(" --max-concurrency 32", "")) is None
    assert bench_shape(BENCH.format(L=256, R=128, C=32).replace("random-ids", "sharegpt")) is None
    assert bench_shape("python3 my_client.py --max-concurrency 4") is None
    assert bench_shape(None) is None and bench_shape("bench_serving 'unclosed") is None


def test_a_load_counted_by_hand():
    """4 requests of 5 tokens, 2 at a time, every request accepting 1 draft: 2 tokens a cycle,
    so each request needs 2 decode cycles after its prefill; the two replacements arrive one
    cycle after the first pair finished and are prefilled together."""
    costs = CycleCosts(
        decode_a=1000.0,
        decode_b=10.0,
        prefill=500.0,
        decode_cycles=0,
        prefill_cycles=0,
        decode_total=0,
        prefill_total=0,
    )
    sim = simulate(BenchShape(4, 2, 5, 1.0), [1], 1, costs, step_ns=100.0, profiled_steps=3, seeds=(1,))
    assert (sim.decode_cycles, sim.prefill_cycles) == (4, 2)
    # each decode cycle at batch 2 and 2 rounds fewer than profiled: 1000 + 20 - 200
    assert sim.decode_ns == 4 * 820 and sim.prefill_ns == 2 * 500
    # accepting 3 drafts at 3 steps: 4 tokens a cycle, one decode cycle per request
    sim3 = simulate(BenchShape(4, 2, 5, 1.0), [3], 3, costs, step_ns=100.0, profiled_steps=3, seeds=(1,))
    assert (sim3.decode_cycles, sim3.prefill_cycles) == (2, 2)


def stand_in_run(
    folder: Path,
    n: int,
    rates: list[float] | Callable[[int], list[float]],
    R: int = 192,
    C: int = 16,
    L: int = 96,
    seed: int = 5,
):
    """Write a closed-loop run at num-steps n; return its true benchmark time (ns). `rates`: the
    per-position acceptance, or a function of the cycle's batch size giving it."""
    rng = random.Random(seed)

    def accept(bs: int) -> int:
        a = 0
        for r in (rates(bs) if callable(rates) else rates)[:n]:
            if rng.random() >= r:
                break
            a += 1
        return a

    recs: list[dict] = [header(argv=CMD.format(n=n, d=n + 1).split())]
    t = cycle = 0
    left = [L - 1] * C  # tokens still to decode per request in flight
    issued, queue = C, [0, 0]  # replacements: [sent last cycle, arrived]

    def emit(kind: str, period: int, attrs: dict, phases: dict[str, int]) -> None:
        nonlocal t, cycle
        for name, ns in phases.items():
            recs.append({"kind": "phase", "name": name, "cycle": cycle, "depth": 0, "parent": None, "t0": t,
                         "t1": t + ns, "host_ns": ns, "dev_ns": None, "dev_off_ns": None, "graph": False,
                         "captured": False})  # fmt: skip
        recs.append({"kind": "cycle", "cycle": cycle, "t0": t, "t1": t + period - 1000, "host_ns": period - 1000,
                     "dev_ns": None, "dev_gap_ns": None, "attrs": {"kind": kind, **attrs}})  # fmt: skip
        t += period
        cycle += 1

    emit("prefill", PREFILL, {"batch_size": C}, {})
    while left or any(queue):
        if queue[1]:
            left += [L - 1] * queue[1]
            emit("prefill", PREFILL, {}, {})
        queue = [0, queue[0]]
        if not left:
            continue
        bs = len(left)
        acc = [accept(bs) for _ in left]
        emit(
            "decode",
            BASE + PER_REQ * bs + n * STEP,
            {"batch_size": bs, "accepted": sum(acc), "accepted_per_req": acc},
            {"draft_forward": n * STEP, "target_verify": BASE // 2},
        )
        still = []
        for need, a in zip(left, acc):
            need -= a + 1
            if need > 0:
                still.append(need)
            elif issued < R:
                issued += 1
                queue[0] += 1
        left = still
    emit("decode", 1, {"batch_size": 1}, {})  # the last period needs a next start
    timing = folder / "timing"
    timing.mkdir(parents=True)
    (timing / "phase-timing.rank0.pid7.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    tps = R * L / (t - 1) * 1e9
    (folder / "summary.json").write_text(
        json.dumps({"meta": {"tokens_per_s": tps, "benchmark_command": BENCH.format(L=L, R=R, C=C)}})
    )
    return t - 1


@pytest.mark.parametrize(
    "rates", [[0.9, 0.8, 0.7, 0.6, 0.5], [0.8, 0.4, 0.2, 0.1, 0.05]], ids=["high", "decaying"]
)
def test_the_replay_predicts_the_stand_ins_benchmark_time(tmp_path, rates):
    # the stand-in's own time at n varies with its acceptance draws (about 2.5 % between runs,
    # mostly in how many prefill cycles the finishing requests cost): its mean over 8 runs
    truth = {
        n: sum(stand_in_run(tmp_path / f"n{n}s{seed}", n, rates, seed=seed) for seed in range(8)) / 8
        for n in range(1, 6)
    }
    pred = predict_run(tmp_path / "n5s0", bootstrap=40)
    sim = pred["simulation"]
    assert sim["load"] == {"requests": 192, "concurrency": 16, "output_len": 96, "range_ratio": 1.0}
    assert sim["prefill_ms"] == pytest.approx(PREFILL / 1e6)
    assert sim["decode_us_per_request"] == pytest.approx(PER_REQ / 1e3, rel=1e-6)
    tps5 = json.loads((tmp_path / "n5s0" / "summary.json").read_text())["meta"]["tokens_per_s"]
    for p in pred["points"]:
        n = p["num_steps"]
        # the replay draws acceptance at random too: the whole benchmark's time within 3 %
        assert p["ratio_to_profiled"] == pytest.approx(truth[5] / truth[n], rel=0.03), n
        assert p["tokens_per_s"] == pytest.approx(tps5 * truth[5] / truth[n], rel=0.03), n
        assert p["benchmark"]["seconds"] == pytest.approx(truth[n] / 1e9, rel=0.04), n
    ranked = sorted(truth, key=lambda n: truth[n])
    if truth[ranked[1]] / truth[ranked[0]] > 1.03:  # a clear best must be found
        assert pred["best"]["num_steps"] == ranked[0]
    assert any("replayed" in a for a in pred["assumptions"])
    # the decode-share scaling (what is left when the load is unknown) misses num-steps 1 by more
    summary = tmp_path / "n5s0" / "summary.json"
    meta = json.loads(summary.read_text())["meta"]
    summary.write_text(json.dumps({"meta": {**meta, "benchmark_command": "python3 my_client.py"}}))
    old = predict_run(tmp_path / "n5s0", bootstrap=0)["points"][0]["ratio_to_profiled"]
    new = pred["points"][0]["ratio_to_profiled"]
    print("num-steps 1, x profiled: truth", truth[5] / truth[1], "replay", new, "decode share", old)
    assert abs(old - truth[5] / truth[1]) > abs(new - truth[5] / truth[1])


def test_without_the_load_the_decode_share_model_is_kept(tmp_path):
    stand_in_run(tmp_path / "r", 3, [0.9, 0.8, 0.7], R=64, C=8, L=48)
    summary = tmp_path / "r" / "summary.json"
    meta = json.loads(summary.read_text())["meta"]
    meta["benchmark_command"] = "python3 my_client.py"
    summary.write_text(json.dumps({"meta": meta}))
    pred = predict_run(tmp_path / "r", bootstrap=0)
    assert pred["simulation"] is None
    assert all("benchmark" not in p for p in pred["points"])
    assert any("outside decode cycles" in a for a in pred["assumptions"])


def test_cycle_costs_leave_out_pauses_and_stalls():
    cycles = [
        {"cycle": i, "t0": i * 10_000_000, "attrs": {"kind": "decode", "batch_size": 4}} for i in range(30)
    ]
    cycles[12]["t0"] += 0  # ordinary
    for c in cycles[20:]:
        c["t0"] += 5_000_000_000  # the client paused 5 s before cycle 20
    costs = cycle_costs(cycles, stalls={3})
    assert costs is not None
    assert costs.decode_cycles == 27  # 29 periods less the pause and the stall
    assert costs.decode(4) == pytest.approx(10_000_000)
    assert cycle_costs(cycles[:5]) is None


def test_the_report_splits_the_window_between_decode_and_prefill(tmp_path):
    from patchkit.report import build_report

    stand_in_run(tmp_path / "r", 2, [0.9, 0.8], R=40, C=8, L=32)
    summary = build_report(tmp_path / "r" / "timing", tmp_path / "out", meta={}, chart=False)
    split = summary.time_split
    assert split["prefill"]["period_mean_ms"] == pytest.approx(PREFILL / 1e6)
    recs = [json.loads(line) for line in (tmp_path / "r" / "timing" / "phase-timing.rank0.pid7.jsonl").open()]
    prefills = sum(1 for r in recs if r["kind"] == "cycle" and r["attrs"]["kind"] == "prefill")
    assert split["prefill"]["cycles"] == prefills
    # every period but the last cycle's (no next start) is in one of the two parts
    assert split["decode"]["cycles"] + prefills == sum(1 for r in recs if r["kind"] == "cycle") - 1
    table = (tmp_path / "out" / "table.txt").read_text()
    assert f"prefill {prefills} x 30.00 ms" in table
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["time_split"] == split


def test_where_the_spread_between_starts_lies():
    from patchkit.profile.remote.spread import spread_by_part

    def split(decode_s, prefill_s):
        return {
            "decode": {"total_s": decode_s, "cycles": 100},
            "prefill": {"total_s": prefill_s, "cycles": 10},
        }

    # point a: decode the same, prefill 2 s apart; point b: one run only (no spread); c failed
    parts = spread_by_part({"a": [split(8, 2), split(8, 4)], "b": [split(5, 1)], "c": [None, None]})
    scale = 11.0  # a's mean time in cycles
    assert parts["df"] == 1
    assert parts["decode"] == 0
    assert parts["prefill"] == pytest.approx(2**0.5 / scale)  # sd of (2, 4) over the mean 11 s
    assert parts["total"] == pytest.approx(parts["prefill"])
    assert spread_by_part({"b": [split(5, 1)]}) is None
    from patchkit.profile.remote.sweep import extra_lines

    (line,) = extra_lines({"spread_by_part": parts}, None)
    assert line.startswith("between starts (pooled over the points, 1 df")
    assert "decode cycles 0.0 %, prefill cycles 12.9 %" in line


def test_time_split_needs_no_batch_size():
    """transformers' generate calls name no batch size: no replay, but the split still holds."""
    from patchkit.report.benchsim import time_split

    cycles = [{"cycle": i, "t0": i * 5_000_000, "attrs": {"kind": "decode"}} for i in range(12)]
    cycles[4]["attrs"] = {"kind": "prefill"}
    assert cycle_costs(cycles) is None
    split = time_split(cycles)
    assert split["decode"]["cycles"] == 10 and split["prefill"]["cycles"] == 1
    assert split["decode"]["period_mean_ms"] == pytest.approx(5.0)


@pytest.mark.slow  # replays the benchmark for every point and start count (about 3 s)
def test_how_many_starts_would_tell_the_predicted_best(tmp_path):
    """profile.predict says what measuring its best against the runner-up would take: at a
    given spread, or at the spread cached for the same server command by earlier sweeps."""

    from patchkit.profile.remote.spread import cache_key, prediction_plan, spread_for_command, update_spread
    from patchkit.profile.sequential import plan_runs

    run = tmp_path / "r"
    stand_in_run(run, 4, [0.9, 0.8, 0.7, 0.6], R=64, C=8, L=48)
    server = "python3 -m sglang.launch_server --model-path M --speculative-num-steps 4 --port 30000"
    meta = json.loads((run / "summary.json").read_text())["meta"]
    (run / "summary.json").write_text(json.dumps({"meta": {**meta, "server_command": server}}))
    pred = predict_run(run, bootstrap=0)
    plan = prediction_plan(pred, 0.04, "given")
    ranked = sorted(pred["points"], key=lambda p: -p["ratio_to_profiled"])
    assert (plan["best"], plan["runner_up"]) == (ranked[0]["num_steps"], ranked[1]["num_steps"])
    gap = ranked[0]["ratio_to_profiled"] / ranked[1]["ratio_to_profiled"] - 1
    assert plan["predicted_difference"] == pytest.approx(gap)
    assert plan["runs_per_point"] == plan_runs(0.04, gap, points=2)
    assert prediction_plan(pred, None, "none")["runs_per_point"] is None

    # the cache: entries of two targets for this command (the one with more df is read), one
    # for another command (never read)
    cache = tmp_path / "spread.json"
    swept = {"speculative-num-steps": [1, 2]}
    update_spread(cache, cache_key(["h1:/site"], server, swept), {"spread": 0.03, "df": 2, "runs": 4})
    update_spread(cache, cache_key(["h2:/site"], server, swept), {"spread": 0.05, "df": 6, "runs": 9})
    update_spread(
        cache, cache_key(["h1:/site"], server + " --tp 2", swept), {"spread": 0.5, "df": 9, "runs": 12}
    )
    entry = spread_for_command(cache, server, {"speculative-num-steps": None})
    assert entry["spread"] == pytest.approx(0.05) and entry["df"] == 6
    assert spread_for_command(cache, "another server", {}) is None

    def task(*args, env_cache):
        env = {**__import__("os").environ, "PATCHKIT_SPREAD_CACHE": str(env_cache)}
        return invoke("profile.predict", str(run), *args, env=env)

    proc = task(env_cache=cache)
    assert proc.returncode == 0, proc.stderr
    assert "at 5.0 % between starts (cached, 6 df)" in proc.stdout
    assert json.loads((run / "predict.json").read_text())["plan"]["spread"] == pytest.approx(0.05)
    proc = task("--spread", "4", env_cache=tmp_path / "none.json")
    assert "at 4.0 % between starts (given)" in proc.stdout
    proc = task(env_cache=tmp_path / "none.json")
    assert "no spread between server starts is known" in proc.stdout
    proc = task("--spread", "-1", env_cache=cache)
    assert proc.returncode == 2 and "spread" in proc.stderr


def test_the_reports_what_if_line_names_what_its_ratios_are_of(tmp_path):
    from patchkit.report import build_report

    stand_in_run(tmp_path / "r", 3, [0.9, 0.8, 0.7], R=64, C=8, L=48)
    meta = json.loads((tmp_path / "r" / "summary.json").read_text())["meta"]
    replayed = build_report(tmp_path / "r" / "timing", tmp_path / "a", meta=meta, chart=False)
    assert replayed.prediction["ratio_of"] == "benchmark"
    assert "x this run's benchmark tokens/s" in (tmp_path / "a" / "table.txt").read_text()
    plain = build_report(tmp_path / "r" / "timing", tmp_path / "b", meta={}, chart=False)
    assert plain.prediction["ratio_of"] == "decode"
    assert "x this run's decode tokens/s" in (tmp_path / "b" / "table.txt").read_text()


@pytest.mark.slow  # simulates a 400-request load whole and in part, and a 10,000-request one (6-9 s)
def test_a_long_load_is_replayed_in_part_and_scaled(monkeypatch):
    """A load too long to replay whole runs twice in part and is extrapolated: here a budget of
    5,000 request steps against a load of ~16,500 (400 requests, 16 in flight)."""
    import time

    from patchkit.report import benchsim

    costs = CycleCosts(9e6, 150e3, 30e6, 0, 0, 0, 0)
    accepts = [0, 1, 1, 2, 2, 2]
    whole = simulate(BenchShape(400, 16, 96, 1.0), accepts, 2, costs, 400e3, 2)
    assert whole.scale == 1.0
    monkeypatch.setattr(benchsim, "MAX_REQUEST_STEPS", 5_000)
    t0 = time.perf_counter()
    part = simulate(BenchShape(400, 16, 96, 1.0), accepts, 2, costs, 400e3, 2)
    assert part.scale > 1.5 and time.perf_counter() - t0 < 30  # bounded, not timed
    assert part.decode_cycles == pytest.approx(whole.decode_cycles, rel=0.02)
    # parts of 4 and 8 waves: the prefill cycles of the 25-wave load come out low (the
    # docstring says by how much); the whole time within 6 %
    assert 0.8 * whole.prefill_cycles < part.prefill_cycles < whole.prefill_cycles
    assert part.total_ns == pytest.approx(whole.total_ns, rel=0.06)
    # far beyond the budget even at 4 waves of the concurrency: fewer seeds, still an answer
    huge = simulate(BenchShape(10_000, 512, 4096, 1.0), accepts, 2, costs, 400e3, 2)
    assert huge.scale > 1 and huge.total_ns > 0


def test_acceptance_is_drawn_at_the_replayed_batch_size():
    acc = Acceptance({4: [3] * MIN_POOL_STEPS, 8: [1] * 50, 9: [2] * 50, 16: [0] * MIN_POOL_STEPS})
    assert set(acc.at(4)) == {3} and set(acc.at(16)) == {0}
    # a sparse batch size pools with the nearest ones (the smaller first) until MIN_POOL_STEPS
    assert acc.at(8)[:100] == [1] * 50 + [2] * 50 and acc.at(8)[100:] == [3] * MIN_POOL_STEPS
    assert acc.at(12)[:50] == [2] * 50  # 9 is nearest to 12, then 8, then 16
    assert acc.at(12)[100:] == [0] * MIN_POOL_STEPS
    assert Acceptance([1, 2]).at(7) == [1, 2]  # no batch sizes: one pool


BATCH_RATES_FULL, BATCH_RATES_SHORT = [0.7, 0.4, 0.2, 0.1, 0.05], [0.95, 0.9, 0.9, 0.85, 0.8]


def batch_dependent_rates(bs: int) -> list[float]:
    """Acceptance that depends on the batch: a full batch of 16 accepts little, a batch short of
    requests (replacements on their way, the load's tail) accepts much."""
    return BATCH_RATES_FULL if bs >= 16 else BATCH_RATES_SHORT


def test_acceptance_that_depends_on_the_batch_size_is_replayed_by_batch_size(tmp_path):
    """The stand-in's acceptance depends on its batch size. A replay drawing acceptance over
    every batch size put the short batches' acceptance into full ones: it named num-steps 3
    (true best: 5), was 13 % high at num-steps 1 and missed the profiled run itself by 14 %.
    Drawn by batch size, every point is within 3 % of the stand-in's true time."""
    truth = {
        n: sum(
            stand_in_run(tmp_path / f"n{n}s{seed}", n, batch_dependent_rates, R=128, seed=seed)
            for seed in range(8)
        )
        / 8
        for n in range(1, 6)
    }
    ranked = sorted(truth, key=lambda n: truth[n])
    assert ranked[0] == 5 and truth[ranked[1]] / truth[5] > 1.015  # a best to find
    pred = predict_run(tmp_path / "n5s0", bootstrap=0)
    for p in pred["points"]:
        n = p["num_steps"]
        assert p["ratio_to_profiled"] == pytest.approx(truth[5] / truth[n], rel=0.03), n
    assert pred["best"]["num_steps"] == 5
    assert not pred["replay_miss"]["flagged"] and abs(pred["replay_miss"]["miss"]) < 0.03


@pytest.mark.parametrize("requests, flagged", [(192, False), (240, True)])
def test_a_replay_that_misses_the_profiled_run_is_flagged(tmp_path, requests, flagged):
    """The benchmark command names the load that ran (192 requests: the replay within 5 % of the
    run's time in cycles), or a quarter more than ran (the replay ~25 % long: flagged)."""
    stand_in_run(tmp_path / "r", 3, [0.9, 0.8, 0.7])
    summary = tmp_path / "r" / "summary.json"
    meta = json.loads(summary.read_text())["meta"]
    meta["benchmark_command"] = BENCH.format(L=96, R=requests, C=16)
    summary.write_text(json.dumps({"meta": meta}))
    code, out, err = in_process("profile.predict", str(tmp_path / "r"), "--bootstrap", "0")
    assert code == 0, err
    miss = json.loads((tmp_path / "r" / "predict.json").read_text())["replay_miss"]
    assert miss["flagged"] is flagged and miss["limit"] == 0.05
    assert miss["miss"] == pytest.approx(miss["replayed_s"] / miss["measured_s"] - 1)
    assert (abs(miss["miss"]) > 0.05) is flagged
    assert ("WARNING: the replay of the profiled run misses its measured time" in out) is flagged
