"""Acceptance and the what-if model on synthetic records with known costs (CPU, no sleeping).

The stand-in is an EAGLE-like engine whose costs are set exactly: a decode cycle at num-steps
n and batch size b costs OTHER + n * STEP + VERIFY0 + SLOPE * b * (n + 1) ns and each
request accepts a draft prefix drawn from a known per-position acceptance. Written as the
runtime writes records (host mode), read back through the report and profile.predict: the
predicted tokens/s of every n must equal the analytic value the costs give.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from patchkit.report import build_report
from patchkit.report.acceptance import acceptance, request_accepts, spec_from_argv
from patchkit.report.predict import pooled_interval, predict_run
from support.cli import invoke
from support.timing_files import header

REPO = Path(__file__).resolve().parents[2]
OTHER, STEP, VERIFY0, SLOPE, EXTEND0 = 2_000_000, 400_000, 6_000_000, 20_000, 1_000_000
WALL_T0 = 1_700_000_000_000_000_000
CMD = "python3 -m sglang.launch_server --speculative-num-steps {n} --speculative-eagle-topk 1 --speculative-num-draft-tokens {d}"


def period(n: int, bs: int) -> int:
    return OTHER + n * STEP + VERIFY0 + SLOPE * bs * (n + 1) + EXTEND0


def draw_accept(rng: random.Random, rates: list[float]) -> int:
    a = 0
    for r in rates:
        if rng.random() >= r:
            break
        a += 1
    return a


def write_run(
    folder: Path,
    n: int,
    rates: list[float],
    cycles: int = 1200,
    seed: int = 1,
    v2: bool = False,
    stall_at: int = -1,
    tokens_per_s: float = 1000.0,
) -> Path:
    """A profile.remote-like run folder: timing/ with one rank's records, summary.json meta."""
    rng = random.Random(seed)
    timing = folder / "timing"
    timing.mkdir(parents=True)
    recs: list[dict] = [header(pid=11, wall_t0_ns=WALL_T0, argv=CMD.format(n=n, d=n + 1).split())]
    t = 0
    for i in range(cycles):
        bs = 32 if i % 10 else rng.choice((8, 16, 24))  # the batch varies: the slope is measurable
        acc = [draw_accept(rng, rates[:n]) for _ in range(bs)]
        stall = 150_000_000 if i == stall_at else 0  # a kernel compiled in this cycle's draft loop
        p = period(n, bs) + stall
        phases = [
            ("draft_forward", n * STEP + stall),
            ("target_verify", VERIFY0 + SLOPE * bs * (n + 1)),
            ("draft_extend_after_decode", EXTEND0),
        ]
        pos = t + OTHER // 2
        for name, ns in phases:
            recs.append(
                {
                    "kind": "phase",
                    "name": name,
                    "cycle": i,
                    "depth": 0,
                    "parent": None,
                    "t0": pos,
                    "t1": pos + ns,
                    "host_ns": ns,
                    "dev_ns": None,
                    "dev_off_ns": None,
                    "graph": False,
                    "captured": False,
                }
            )
            pos += ns
        attrs: dict = {"kind": "decode", "batch_size": bs}
        if v2:
            attrs["tokens"] = [a + 1 for a in acc]
        else:
            attrs["accepted"] = sum(acc)
            attrs["accepted_per_req"] = acc
        recs.append(
            {
                "kind": "cycle",
                "cycle": i,
                "t0": t,
                "t1": t + p - 1000,
                "host_ns": p - 1000,
                "dev_ns": None,
                "dev_gap_ns": None,
                "attrs": attrs,
            }
        )
        t += p
    (timing / "phase-timing.rank0.pid11.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    (folder / "summary.json").write_text(
        json.dumps({"meta": {"tokens_per_s": tokens_per_s, "server command": CMD.format(n=n, d=n + 1)}})
    )
    return folder


def analytic_rate(n: int, rates: list[float], bs_mix: dict[int, float]) -> float:
    """Expected decode tokens per ns at n steps for the stand-in (expectation over acceptance)."""
    surv, e_acc = 1.0, 0.0
    for r in rates[:n]:
        surv *= r
        e_acc += surv
    tokens = sum(w * bs * (1 + e_acc) for bs, w in bs_mix.items())
    time = sum(w * period(n, bs) for bs, w in bs_mix.items())
    return tokens / time


def test_spec_flags_from_a_command_line_and_argv():
    assert spec_from_argv(CMD.format(n=5, d=6)) == {"num_steps": 5, "topk": 1, "num_draft_tokens": 6}
    assert spec_from_argv(["x", "--speculative-num-steps=3", "--speculative-algorithm", "EAGLE3"]) == {
        "num_steps": 3,
        "algorithm": "EAGLE3",
    }
    assert spec_from_argv(None) == {} and spec_from_argv(["--speculative-num-steps"]) == {}


def test_request_accepts_reads_every_record_form():
    assert request_accepts({"accepted": 3, "accepted_per_req": [1, 2, 0]}) == ([1, 2, 0], None)
    assert request_accepts({"tokens": [1, 4, 2]}) == ([0, 3, 1], None)  # v2: committed = accepted + 1
    assert request_accepts({"accepted": 2, "drafted": 4, "batch_size": 1}) == ([2], [4])
    assert request_accepts({"accepted": 7, "batch_size": 4}) is None  # a sum says nothing per request


def test_a_batch_of_one_keeps_its_acceptance():
    # the runtime writes a one-element tensor as its number (tensor([4]).tolist() -> [4] -> 4):
    # a real 0.5.17 server at batch size 1 wrote {"tokens": 4}; that is one request's 3 drafts
    assert request_accepts({"tokens": 4, "batch_size": 1}) == ([3], None)
    assert request_accepts({"accepted_per_req": 2, "batch_size": 1}) == ([2], None)
    # a plain number in a bigger batch is a sum: nothing per request
    assert request_accepts({"tokens": 9, "batch_size": 3}) is None
    assert request_accepts({"tokens": True, "batch_size": 1}) is None
    cycles = [
        {"cycle": i, "attrs": {"kind": "decode", "batch_size": 1, "tokens": t}}
        for i, t in enumerate([4, 1, 3])
    ]
    acc = acceptance(cycles, {"num_steps": 3})
    assert acc["histogram"] == [1, 0, 1, 1]
    assert abs(acc["mean_accept_length"]["pooled"] - (4 + 1 + 3) / 3) < 1e-9


def test_histogram_position_rates_and_the_two_means():
    # two requests of transformers' kind (batch 1): one accepts every draft, one accepts none
    cycles = [{"cycle": 0, "attrs": {"accepted": 4, "drafted": 4, "batch_size": 1, "prefill": True}}]
    cycles += [{"cycle": i, "attrs": {"accepted": 4, "drafted": 4, "batch_size": 1}} for i in range(1, 3)]
    cycles += [{"cycle": 3, "attrs": {"accepted": 0, "drafted": 4, "batch_size": 1, "prefill": True}}]
    acc = acceptance(cycles)
    assert acc["histogram"] == [1, 0, 0, 0, 3]
    assert [r["rate"] for r in acc["position_rate"]] == [0.75] * 4
    assert acc["conditional_rate"][0]["rate"] == 0.75 and acc["conditional_rate"][1]["rate"] == 1.0
    means = acc["mean_accept_length"]
    assert means["pooled"] == pytest.approx(1 + 12 / 4)  # 4.0: long requests weigh more
    assert means["per_request"] == pytest.approx((5 + 1) / 2)  # 3.0: each request once
    # SGLang's batches do not name requests: per_request is None and says why
    sg = acceptance([{"cycle": 0, "attrs": {"accepted_per_req": [1, 2], "batch_size": 2}}], {"num_steps": 3})
    assert (
        sg["mean_accept_length"]["per_request"] is None
        and "requests" in sg["mean_accept_length"]["per_request_note"]
    )
    assert sg["histogram"] == [0, 1, 1, 0] and sg["position_rate"][2]["rate"] == 0.0


def test_drift_over_the_run_is_seen():
    cycles = [
        {"cycle": i, "attrs": {"accepted_per_req": [3 if i < 50 else 1] * 4, "batch_size": 4}}
        for i in range(100)
    ]
    acc = acceptance(cycles, {"num_steps": 3})
    assert acc["drift"] == pytest.approx(-2.0)
    assert acc["over_run"][0]["pooled"] == pytest.approx(4.0)


@pytest.mark.parametrize("v2", [False, True])
def test_report_has_the_acceptance_section(tmp_path, v2):
    run = write_run(tmp_path / "run", 5, [0.9, 0.8, 0.7, 0.6, 0.5], cycles=200, v2=v2)
    summary = build_report(run / "timing", tmp_path / "out", meta={"tokens_per_s": 1.0}, chart=False)
    acc = summary.acceptance
    assert acc and acc["num_steps"] == 5 and acc["num_steps_source"].startswith("server flag")
    assert acc["cycles_with_acceptance"] == 200 and len(acc["histogram"]) == 6
    assert 0.85 < acc["position_rate"][0]["rate"] < 0.95
    table = (tmp_path / "out" / "table.txt").read_text()
    assert "accept length     pooled over verify steps" in table and "accepted at k" in table
    doc = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert doc["acceptance"]["request_steps"] == acc["request_steps"]
    # the report mentions the predicted best (profile.predict gives the intervals)
    assert (
        doc["prediction"]["profiled_num_steps"] == 5 and doc["prediction"]["ratio_by_num_steps"]["5"] == 1.0
    )
    assert f"what-if: num-steps {doc['prediction']['best_num_steps']} predicted best" in table


@pytest.mark.parametrize(
    "rates",
    [[0.95, 0.9, 0.85, 0.8, 0.75], [0.8, 0.5, 0.25, 0.1, 0.05]],  # high, and decaying with position
    ids=["flat", "decaying"],
)
def test_prediction_matches_the_stand_ins_known_costs(tmp_path, rates):
    run = write_run(tmp_path / "run", 5, rates, cycles=1500, seed=3)
    pred = predict_run(run, bootstrap=60, verify_us_per_token=SLOPE / 1e3)
    costs = pred["costs"]
    assert costs["draft_step_ms"] == pytest.approx(STEP / 1e6, rel=1e-6)
    # the batch varies in the stand-in only through the slope: here a fit would be right
    assert costs["verify_us_per_token_fitted"] == pytest.approx(SLOPE / 1e3, rel=1e-6)
    mix = {32: 0.9, 8: 0.1 / 3, 16: 0.1 / 3, 24: 0.1 / 3}
    points = {p["num_steps"]: p for p in pred["points"]}
    for n in range(1, 6):
        expect = analytic_rate(n, rates, mix) / analytic_rate(5, rates, mix)
        # the records' acceptance is a sample: within 2 % of the expectation, and the
        # bootstrap interval covers it
        assert points[n]["ratio_to_profiled"] == pytest.approx(expect, rel=0.02), n
        lo, hi = points[n]["ratio_ci95"]
        assert lo - 0.005 <= expect <= hi + 0.005, (n, lo, expect, hi)
    best = max(range(1, 6), key=lambda n: analytic_rate(n, rates, mix))
    assert pred["best"]["num_steps"] == best
    assert points[5]["ratio_to_profiled"] == 1.0 and points[5]["profiled"]


def test_without_the_slope_fewer_steps_are_predicted_slower_than_they_are(tmp_path):
    """The default slope is 0: when verify does grow with the draft (as the stand-in's does,
    steeply), the prediction for fewer steps errs on the slow side: a conservative what-if."""
    rates = [0.9, 0.8, 0.7, 0.6, 0.5]
    pred = predict_run(write_run(tmp_path / "r", 5, rates, cycles=800), bootstrap=0)
    mix = {32: 0.9, 8: 0.1 / 3, 16: 0.1 / 3, 24: 0.1 / 3}
    for p in pred["points"][:-1]:
        truth = analytic_rate(p["num_steps"], rates, mix) / analytic_rate(5, rates, mix)
        assert p["ratio_to_profiled"] < truth
    assert "cost the same at every num-steps" in " ".join(pred["assumptions"])


def test_a_stall_is_left_out_of_the_costs(tmp_path):
    """A cycle that compiled a kernel (150 ms in its draft loop, as the H200 run had) would
    make the draft round look 4x dearer; the report's stall rule leaves it out, here too."""
    pred = predict_run(
        write_run(tmp_path / "r", 5, [0.9, 0.8, 0.7, 0.6, 0.5], cycles=300, stall_at=40), bootstrap=0
    )
    assert pred["costs"]["draft_step_ms"] == pytest.approx(STEP / 1e6, rel=1e-6)
    assert pred["cycles"] == 298  # the stall and the last cycle (no next start: no period)


def test_the_decaying_profile_prefers_fewer_steps(tmp_path):
    pred = predict_run(write_run(tmp_path / "r", 5, [0.8, 0.5, 0.25, 0.1, 0.05], cycles=600), bootstrap=0)
    assert pred["best"]["num_steps"] < 5


def test_profile_predict_task_writes_predict_json(tmp_path):
    run = write_run(tmp_path / "run", 4, [0.9, 0.7, 0.5, 0.3], cycles=300)
    proc = invoke("profile.predict", str(run))
    assert proc.returncode == 0, proc.stderr
    assert "predicted best: num-steps" in proc.stdout
    doc = json.loads((run / "predict.json").read_text())
    assert doc["schema"] == "patchkit.predict/1" and [p["num_steps"] for p in doc["points"]] == [1, 2, 3, 4]


def test_pooled_runs_give_the_median_and_a_slow_start_does_not_move_it(tmp_path):
    """Three starts of one configuration, one of them slow (700 tok/s against ~1000): --pool
    predicts each and gives the medians, so the slow start's prediction is outvoted; every
    run's figures stay in predict.json; a run of another num-steps is refused (exit 2) and
    nothing is written."""
    rates = [0.9, 0.7, 0.5, 0.3]
    runs = [
        write_run(tmp_path / "a", 4, rates, cycles=300, seed=1, tokens_per_s=1000.0),
        write_run(tmp_path / "b", 4, rates, cycles=300, seed=2, tokens_per_s=1010.0),
        write_run(tmp_path / "c", 4, rates, cycles=300, seed=3, tokens_per_s=700.0),
    ]
    alone = [predict_run(r, bootstrap=0) for r in runs]
    out = tmp_path / "pooled.json"
    args = ["profile.predict", str(runs[2])]
    args += ["--pool", str(runs[0]), "--pool", str(runs[1]), "--out", str(out), "--bootstrap", "0"]
    proc = invoke(*args)
    assert proc.returncode == 0, proc.stderr
    assert "what-if from 3 runs (medians of their predictions)" in proc.stdout
    doc = json.loads(out.read_text())
    assert doc["pooled"]["runs"] == [str(runs[2]), str(runs[0]), str(runs[1])]
    assert doc["pooled"]["profiled_tokens_per_s"] == [700.0, 1000.0, 1010.0]
    assert doc["profiled"]["tokens_per_s"] == 1000.0
    for i, point in enumerate(doc["points"]):
        each = sorted(a["points"][i]["tokens_per_s"] for a in alone)
        assert point["tokens_per_s"] == pytest.approx(each[1])  # the median, not the slow one
        assert sorted(point["tokens_per_s_runs"]) == pytest.approx(each)
        ratios = sorted(a["points"][i]["ratio_to_profiled"] for a in alone)
        assert point["ratio_to_profiled"] == pytest.approx(ratios[1])
    assert doc["best"]["num_steps"] == max(doc["points"], key=lambda p: p["ratio_to_profiled"])["num_steps"]
    other = write_run(tmp_path / "d", 3, rates[:3], cycles=100)
    bad = tmp_path / "bad.json"
    proc = invoke("profile.predict", str(runs[0]), "--pool", str(other), "--out", str(bad))
    assert proc.returncode == 2 and "another configuration" in proc.stderr, proc.stderr
    assert not bad.exists()


def test_profile_predict_refuses_a_bad_slope(tmp_path):
    run = write_run(tmp_path / "run", 3, [0.9, 0.7, 0.5], cycles=50)
    for bad in ("abc", "-1", "nan"):
        proc = invoke("profile.predict", str(run), "--verify-us-per-token", bad)
        assert proc.returncode == 2 and "--verify-us-per-token" in proc.stderr, (bad, proc.stderr)
    assert not (run / "predict.json").exists()


def test_profile_predict_refuses_a_folder_without_timing(tmp_path):
    proc = invoke("profile.predict", str(tmp_path))
    assert proc.returncode == 2 and "no timing files" in proc.stderr


def test_from_prediction_keeps_the_top_points_and_the_profiled_one(tmp_path):
    from patchkit.report.predict import load_prediction, matrix_with_steps, promising

    run = write_run(tmp_path / "run", 5, [0.8, 0.5, 0.25, 0.1, 0.05], cycles=400)
    doc = predict_run(run, bootstrap=0)
    (run / "predict.json").write_text(json.dumps(doc))
    pred = load_prediction(run)
    ranked = sorted(doc["points"], key=lambda p: -p["decode_tokens_per_s"])
    steps = promising(pred, 2)
    assert steps == sorted({ranked[0]["num_steps"], ranked[1]["num_steps"], 5})
    assert matrix_with_steps("speculative-num-steps=1,2,3,4,5;env:NCCL_PROTO=LL", [2, 5]) == (
        "speculative-num-steps=2,5;env:NCCL_PROTO=LL"
    )
    assert matrix_with_steps(None, [1, 5]) == "speculative-num-steps=1,5"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--top", "2"], "--top needs --from-prediction"),
        (["--from-prediction", "{missing}"], "run profile.predict RUN first"),
        (["--from-prediction", "{run}", "--top", "0"], "top"),
    ],
)
def test_from_prediction_bad_inputs_stop_before_any_target(tmp_path, args, message):
    run = write_run(tmp_path / "run", 3, [0.9, 0.7, 0.5], cycles=60)
    (run / "predict.json").write_text(json.dumps(predict_run(run, bootstrap=0)))
    target = tmp_path / "tree"
    target.mkdir()
    args = [a.format(run=run, missing=tmp_path / "nothing") for a in args]
    proc = invoke(
        *[
            "profile.remote",
            "--target",
            str(target),
            "--series",
            "sglang-v0.5.12",
            "--server",
            "true",
            "--bench",
            "true",
            "--no-chart",
            *args,
        ],
    )
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert list(target.iterdir()) == []


@pytest.mark.slow  # draws two charts (about 2 s)
def test_the_chart_gains_an_acceptance_panel(tmp_path):
    """phases.png: a third panel (per-position acceptance) when the records carry acceptance:
    the figure is 17 inches wide instead of 14 (the saved PNG trims its margins)."""
    import struct

    def width(png: Path) -> int:
        return struct.unpack(">I", png.read_bytes()[16:20])[0]

    run = write_run(tmp_path / "run", 4, [0.9, 0.7, 0.5, 0.3], cycles=60)
    build_report(run / "timing", tmp_path / "with", meta={}, chart=True)
    bare = tmp_path / "bare" / "timing"
    bare.mkdir(parents=True)
    text = (run / "timing" / "phase-timing.rank0.pid11.jsonl").read_text()
    (bare / "phase-timing.rank0.pid11.jsonl").write_text(text.replace('"accepted_per_req"', '"other"'))
    build_report(bare, tmp_path / "without", meta={}, chart=True)
    assert 1.1 < width(tmp_path / "with" / "phases.png") / width(tmp_path / "without" / "phases.png") < 1.3


@pytest.fixture
def scipy_stats():
    return pytest.importorskip("scipy.stats")


def test_pooled_interval_is_the_t_interval_of_the_starts_mean(scipy_stats):
    """--pool's interval is an interval of the mean over starts (not the union of the runs'
    intervals): the t interval of the runs' log predictions with runs - 1 df, its spread never
    below the runs' own intervals'."""

    values = [1.10, 1.02, 1.07]
    own = [[1.08, 1.12], [1.00, 1.04], [1.05, 1.09]]
    logs = [math.log(v) for v in values]
    mean, var = sum(logs) / 3, scipy_stats.tvar(logs)
    half = scipy_stats.t.ppf(0.975, 2) * math.sqrt(var / 3)
    assert pooled_interval(values, own) == pytest.approx([math.exp(mean - half), math.exp(mean + half)])
    # two runs that happen to agree: the interval is the runs' own, not a point
    lo, hi = pooled_interval([1.05, 1.05], [[1.0, 1.1], [1.0, 1.1]])
    assert lo < 1.0 and hi > 1.1
    assert pooled_interval([1.05], [[1.0, 1.1]]) is None


def test_pooled_interval_covers_the_mean_over_starts_where_the_union_does_not():
    # each start's prediction is the truth times its start's luck (3 %) times its own noise
    # (0.3 %, which its interval knows); the union of two runs' intervals knows no luck
    rng = random.Random(4)
    runs = 400
    hit = {"pooled": 0, "union": 0}
    for _ in range(runs):
        preds = [math.exp(rng.gauss(0, 0.03) + rng.gauss(0, 0.003)) for _ in range(2)]
        own = [[p * math.exp(-0.00588), p * math.exp(0.00588)] for p in preds]
        lo, hi = pooled_interval(preds, own)
        hit["pooled"] += lo <= 1.0 <= hi
        hit["union"] += min(c[0] for c in own) <= 1.0 <= max(c[1] for c in own)
    assert hit["pooled"] / runs >= 0.92
    assert hit["union"] / runs < 0.85


def test_the_replayed_interval_holds_one_benchmark_pass_at_each_side():
    """Away from the profiled point the replayed ratio's interval adds one pass of the load's
    own variation at each side (the replay's seed-to-seed spread, with a t quantile for its
    few seeds) to the decode model's; at the profiled point it is the decode model's alone.
    bench/predict_interval_sim.py: 94.7-98 % of single measured passes inside, 0 % before."""
    from patchkit.report.benchsim import SimResult
    from patchkit.report.predict import replay_interval
    from patchkit.report.stats import t_ppf

    at_n = SimResult(100, 10, 9e9, 1e9, seed_sd=0.03, seeds=8)
    at_p = SimResult(80, 10, 7e9, 1e9, seed_sd=0.02, seeds=8)
    lo, hi = replay_interval(0.8, 0.9, [0.9, 0.9], at_n, at_p, False)
    half = t_ppf(0.975, 7) * math.sqrt((0.03**2 + 0.02**2) * (1 + 1 / 8))
    assert (math.log(0.8 / lo), math.log(hi / 0.8)) == pytest.approx((half, half))
    assert replay_interval(1.0, 1.0, [0.99, 1.02], at_n, at_p, True) == pytest.approx([0.99, 1.02])
    assert replay_interval(0.8, 0.9, None, at_n, at_p, False) is None


def test_a_known_spread_between_starts_widens_every_point_but_the_profiled_one():
    from patchkit.report.predict import with_start_spread

    def pred():
        return {
            "simulation": {"x": 1},
            "points": [
                {
                    "profiled": True,
                    "ratio_to_profiled": 1.0,
                    "ratio_ci95": [1.0, 1.0],
                    "tokens_per_s": 100.0,
                    "tokens_per_s_ci95": [100.0, 100.0],
                },
                {
                    "profiled": False,
                    "ratio_to_profiled": 0.9,
                    "ratio_ci95": [0.89, 0.91],
                    "tokens_per_s": 90.0,
                    "tokens_per_s_ci95": [89.0, 91.0],
                },
            ],
        }

    got = with_start_spread(pred(), 0.03, "given")
    lo, hi = got["points"][1]["ratio_ci95"]
    assert lo < 0.89
    # two starts' luck, 2 x 3 %^2, beside the interval's own half-width
    assert math.log(hi / 0.9) == pytest.approx(
        math.sqrt(math.log(0.91 / 0.9) ** 2 + 2 * 0.03**2 * 1.959963984540054**2)
    )
    assert got["points"][0]["ratio_ci95"] == [1.0, 1.0] and got["intervals"]["starts"]["spread"] == 0.03
    assert got["intervals"]["start_to_start"] is True
    assert (
        "start-to-start variation included (spread 3 % between starts, given)" in got["intervals"]["covers"]
    )
    alone = with_start_spread(pred(), None, "none")
    assert alone["points"][1]["ratio_ci95"] == [0.89, 0.91]
    assert alone["intervals"]["start_to_start"] is False
    assert alone["intervals"]["covers"] == (
        "within this run's cycles and one pass of the benchmark's load a side; start-to-start "
        "variation not included: give --spread or pool starts (--pool)"
    )
    pooled = with_start_spread(pred() | {"pooled": {"runs": ["a", "b"]}}, 0.03, "given")
    assert pooled["points"][1]["ratio_ci95"] == [0.89, 0.91]
    assert (
        pooled["intervals"]["start_to_start"] is True
        and "the mean over 2 pooled starts" in (pooled["intervals"]["covers"])
    )


@pytest.mark.parametrize(
    ("extra", "covers", "included"),
    [
        (
            [],
            "within this run's cycles; start-to-start variation not included: give --spread or pool starts",
            False,
        ),
        (["--spread", "2"], "start-to-start variation included (spread 2 % between starts, given)", True),
        (["--pool", "b"], "the mean over 2 pooled starts: start-to-start variation included", True),
    ],
)
def test_the_interval_is_named_by_what_it_covers_in_the_table_json_and_page(
    tmp_path, extra, covers, included
):
    """Without a known spread between starts the "95 % interval" holds only what one run fixes
    (at 2 % between starts it misses another start's tok/s far more than 5 % of the time): the
    table, predict.json and the page say so, and say it covers the starts where it does."""
    from html import unescape

    rates = [0.9, 0.7, 0.5]
    run = write_run(tmp_path / "a", 3, rates, cycles=300, seed=1)
    write_run(tmp_path / "b", 3, rates, cycles=300, seed=2)
    extra = [str(tmp_path / "b") if arg == "b" else arg for arg in extra]
    proc = invoke("profile.predict", str(run), "--bootstrap", "40", *extra)
    assert proc.returncode == 0, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("95 % interval ("))
    assert covers in line
    doc = json.loads((run / "predict.json").read_text())
    assert doc["intervals"]["start_to_start"] is included and covers in doc["intervals"]["covers"]
    assert line == f"95 % interval ({doc['intervals']['covers']})"
    page = unescape((run / "report.html").read_text())
    assert f"95 % intervals: {doc['intervals']['covers']}." in page
    scope = "start-to-start variation included" if included else "this run's cycles only"
    assert f"95 % interval ({scope})" in page and f"tok/s 95 % ({scope})" in page


def test_the_bootstrap_interval_is_the_projects_interpolated_percentile():
    """predict's bootstrap interval uses the one percentile of the project (numpy's linear
    definition, patchkit.report.stats), not the draw at a floored index."""
    import numpy

    from patchkit.report.predict import _interval

    rng = random.Random(4)
    for n in (20, 40, 199, 400):
        draws = [rng.lognormvariate(0.0, 0.05) for _ in range(n)]
        assert _interval(draws) == pytest.approx(list(numpy.percentile(draws, [2.5, 97.5])), rel=1e-12)
    assert _interval([1.0] * 19) is None


def test_adaptive_num_steps_is_named_in_the_spec_and_refused_by_predict(tmp_path):
    """A server that picks num-steps at run time (--speculative-adaptive): the records say no
    cycle's num-steps, so the what-if model refuses (exit 2, saying why) and the acceptance
    section says its per-position rates assume the flag's num-steps."""
    assert spec_from_argv(["--speculative-adaptive", "--speculative-num-steps", "3"]) == {
        "adaptive": True,
        "num_steps": 3,
    }
    assert spec_from_argv("--speculative-adaptive=false")["adaptive"] is False
    run = write_run(tmp_path / "run", 3, [0.9, 0.7, 0.5], cycles=300)
    for f in (run / "timing").glob("*.jsonl"):
        text = f.read_text()
        assert '"--speculative-num-steps"' in text
        f.write_text(
            text.replace(
                '"--speculative-num-steps"', '"--speculative-adaptive", "--speculative-num-steps"', 1
            )
        )
    proc = invoke("profile.predict", str(run))
    assert proc.returncode == 2 and "--speculative-adaptive" in proc.stderr, proc.stderr
    assert "which num-steps each cycle ran" in proc.stderr
    assert not (run / "predict.json").exists()
    build_report(run / "timing", tmp_path / "report", meta={}, chart=False)
    acc = json.loads((tmp_path / "report" / "summary.json").read_text())["acceptance"]
    assert "--speculative-adaptive" in acc["num_steps_source"]
